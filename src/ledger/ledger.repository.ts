import type { Em } from "../platform/db/orm.ts";
import { inTransaction, sql } from "../platform/db/sql.ts";

/** An entry to store, its counterparty already reduced to a keyed hash. */
export interface LedgerEntryToStore {
  id: string;
  userId: string;
  amountKobo: bigint;
  direction: "IN" | "OUT";
  counterpartyHash: Buffer;
  scope?: string;
  channel: string;
  occurredAt: Date;
}

/** How long a batch, a rebuild or a reset waits for its users' ledger locks before it is refused as retryable. */
const LOCK_WAIT = "5s";

/**
 * The ledger feature's tables (ledger_entries, ledger_daily, ledger_counterparties, ledger_counterparty_days): the
 * only code that writes them.
 */
export const ledgerRepository = {
  /**
   * Deletes the ledger lines a sandbox partner's collections and refunds wrote (its scope), with their
   * roll-ups: the sandbox reset. The platform's own lines (scope `''`) are untouched.
   */
  async deleteScope(tx: Em, scope: string): Promise<number> {
    if (scope === "") throw new Error("the platform's own ledger is never deleted");
    // Shared, as a batch: a rebuild of these users (which would fold the lines back) waits, or is waited for,
    // while batches of theirs run on: theirs write other scopes' rows, and the fixture users are every partner's.
    const owners = await sql<{ user_id: string }>(
      tx,
      "select distinct user_id from ledger_entries where scope = $1",
      [scope],
    );
    await ledgerRepository.lockUsers(
      tx,
      owners.map((o) => o.user_id),
      "shared",
    );
    await sql(tx, "delete from ledger_daily where scope = $1", [scope]);
    await sql(tx, "delete from ledger_counterparties where scope = $1", [scope]);
    await sql(tx, "delete from ledger_counterparty_days where scope = $1", [scope]);
    const rows = await sql(tx, "delete from ledger_entries where scope = $1 returning id", [scope]);
    return rows.length;
  },

  /**
   * Takes the users' ledger locks until the transaction ends: shared for an ingest batch and a sandbox reset
   * (batches of the same users run side by side), exclusive for a rebuild (it waits for the batches and resets
   * of its users in flight, and theirs wait for it; other users' never do). Always in one order, so no two
   * transactions wait on each other in a cycle. A wait ends at LOCK_WAIT: the statement fails with
   * lock_not_available, which the API answers UNAVAILABLE, retryable. The caller's own lock_timeout is restored.
   */
  async lockUsers(tx: Em, userIds: string[], mode: "shared" | "exclusive"): Promise<void> {
    if (userIds.length === 0) return;
    await sql(tx, `set local lock_timeout = '${LOCK_WAIT}'`);
    await sql(
      tx,
      `select ${mode === "shared" ? "pg_advisory_xact_lock_shared" : "pg_advisory_xact_lock"}(k) from (
         select distinct hashtextextended('ledger_user:' || u, 0) as k from unnest($1::text[]) u order by k
       ) users`,
      [userIds],
    );
    await sql(tx, "set local lock_timeout to default");
  },

  /**
   * One statement per batch (it earns raw SQL: thousands of rows, three tables): inserts the new entries
   * (idempotent by the platform's id) and folds exactly those into the daily roll-ups and the counterparty
   * index, so a snapshot never scans raw entries and a re-sent batch changes nothing. Returns how many were new.
   * In `em`'s transaction when it has one, else its own, holding the batch's users' locks shared.
   */
  ingest(em: Em, entries: LedgerEntryToStore[]): Promise<number> {
    return inTransaction(em, async (tx) => {
      await ledgerRepository.lockUsers(tx, [...new Set(entries.map((e) => e.userId))], "shared");
      return insertAndFold(tx, entries);
    });
  },

  /**
   * Rebuilds the users' roll-ups from their raw entries, in the caller's transaction: deletes their rows of
   * `ledger_daily`, `ledger_counterparties` and `ledger_counterparty_days`, then folds every entry of theirs with
   * the statement ingest uses. The users' locks are held exclusively ({@link lockUsers}) until the transaction
   * ends, so no batch of theirs lands between the two (at once, the fold would miss or double it) and two
   * rebuilds of one user take turns, while ingest and rebuilds of other users run on.
   */
  async rebuildRollups(tx: Em, userIds: string[]): Promise<RebuiltRollups> {
    await ledgerRepository.lockUsers(tx, userIds, "exclusive");
    await sql(tx, "delete from ledger_daily where user_id = any($1::text[])", [userIds]);
    await sql(tx, "delete from ledger_counterparties where user_id = any($1::text[])", [userIds]);
    await sql(tx, "delete from ledger_counterparty_days where user_id = any($1::text[])", [userIds]);
    const [row] = await sql<RebuiltRollups>(tx, REBUILD, [userIds]);
    return row ?? { entries: 0, days: 0, counterparties: 0 };
  },
};

/** What a rebuild folded: entries read, daily rows and counterparty rows written. */
export interface RebuiltRollups {
  entries: number;
  days: number;
  counterparties: number;
}

/**
 * The roll-ups' one definition: folds the rows of the CTE `source` (user_id, amount_kobo, direction,
 * counterparty_hash, day, scope) into `ledger_daily` (totals and counts per user, UTC day and scope),
 * `ledger_counterparties` (first and last day met) and `ledger_counterparty_days` (how many counterparties were
 * last met on each day). Ingest folds the entries it has just inserted; a rebuild folds all of a user's entries
 * after deleting the user's roll-ups. Data-modifying CTEs, to follow `source`'s; `returning` (`returning 1`)
 * lets the statement count the daily rows it wrote.
 *
 * A counterparty whose last day moves (or a new one) moves its count: -1 on the day it leaves (the upsert keeps
 * it in `previous_last_day`, as `returning` sees only the new row), +1 on its new last day, summed per day. A
 * counterparty met again within its known days is not rewritten, so it is not returned and counts nothing.
 * Each CTE writes in key order, and the statement writes the three tables in the same order every time, so
 * concurrent batches of the same users lock shared rows in one order and never wait on each other in a cycle.
 */
const fold = (source: string, returning = "") => `
         daily as (
           insert into ledger_daily as d (user_id, day, scope, inflow_kobo, inflow_count, outflow_kobo, outflow_count)
           select user_id, day, scope,
                  coalesce(sum(amount_kobo) filter (where direction = 'IN'), 0),
                  count(*) filter (where direction = 'IN'),
                  coalesce(sum(amount_kobo) filter (where direction = 'OUT'), 0),
                  count(*) filter (where direction = 'OUT')
             from ${source} group by user_id, day, scope
            order by user_id, day, scope
           on conflict (user_id, day, scope) do update
             set inflow_kobo = d.inflow_kobo + excluded.inflow_kobo,
                 inflow_count = d.inflow_count + excluded.inflow_count,
                 outflow_kobo = d.outflow_kobo + excluded.outflow_kobo,
                 outflow_count = d.outflow_count + excluded.outflow_count
           ${returning}
         ),
         parties as (
           insert into ledger_counterparties as c (user_id, direction, counterparty_hash, scope, first_day, last_day)
           select user_id, direction, counterparty_hash, scope, min(day), max(day) from ${source}
            group by user_id, direction, counterparty_hash, scope
            order by user_id, direction, counterparty_hash, scope
           on conflict (user_id, direction, counterparty_hash, scope) do update
             set first_day = least(c.first_day, excluded.first_day), last_day = greatest(c.last_day, excluded.last_day),
                 previous_last_day = c.last_day
             where excluded.first_day < c.first_day or excluded.last_day > c.last_day
           returning user_id, direction, scope, last_day, previous_last_day
         ),
         moved as (
           insert into ledger_counterparty_days as h (user_id, direction, scope, last_day, parties)
           select user_id, direction, scope, day, sum(n)::int from (
             select user_id, direction, scope, last_day as day, 1 as n from parties
              where previous_last_day is distinct from last_day
             union all
             select user_id, direction, scope, previous_last_day, -1 from parties where previous_last_day <> last_day
           ) m
            group by user_id, direction, scope, day having sum(n) <> 0
            order by user_id, direction, scope, day
           on conflict (user_id, direction, scope, last_day) do update set parties = h.parties + excluded.parties
         )`;

const STATEMENT = `with input as (
           select * from unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bytea[], $6::text[], $7::timestamptz[],
                                $8::text[])
             as t (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, scope)
         ),
         ins as (
           insert into ledger_entries (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, day, scope)
           select id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, (occurred_at at time zone 'UTC')::date, scope
             from input
           on conflict (id) do nothing
           returning user_id, amount_kobo, direction, counterparty_hash, day, scope
         ),${fold("ins")}
         select count(*)::int as inserted from ins`;

/** The batch's one statement ({@link STATEMENT}); the number of entries that were new. */
async function insertAndFold(tx: Em, entries: LedgerEntryToStore[]): Promise<number> {
  const [row] = await sql<{ inserted: number }>(tx, STATEMENT, [
    entries.map((e) => e.id),
    entries.map((e) => e.userId),
    entries.map((e) => e.amountKobo.toString()),
    entries.map((e) => e.direction),
    entries.map((e) => e.counterpartyHash),
    entries.map((e) => e.channel),
    entries.map((e) => e.occurredAt),
    entries.map((e) => e.scope ?? ""),
  ]);
  return row?.inserted ?? 0;
}

/**
 * Every entry of the users, folded afresh (their roll-ups deleted first, in the same transaction). Read user by
 * user through the (user_id, day) index: `offset 0` keeps each user's subquery a scan of its own. As one
 * `user_id = any($1)`, the planner scanned the whole table for a hundred users: its sample of 55 M entries, nine
 * in ten a heavy trader's, counts 2,400 distinct users of 100,000, so it expects 22,000 entries a user. A call of
 * 100 users (55,000 entries) took 21 s at bench:scale's 10× that way, reading all 7 GB; user by user, 1.4-2.1 s.
 */
const REBUILD = `with entries as (
           select e.user_id, e.amount_kobo, e.direction, e.counterparty_hash, e.day, e.scope
             from unnest($1::text[]) u (id)
             cross join lateral (select * from ledger_entries where user_id = u.id offset 0) e
         ),${fold("entries", "returning 1")}
         select (select count(*)::int from entries) as entries, (select count(*)::int from daily) as days,
                (select count(*)::int from parties) as counterparties`;
