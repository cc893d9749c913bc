import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { keyedHash } from "../platform/crypto/keys.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { validationFailed } from "../platform/errors.ts";

/** One entry as the platform sends it. */
export interface LedgerEntryInput {
  id: string;
  userId: string;
  amountKobo: bigint;
  direction: "IN" | "OUT";
  counterpartyId: string;
  channel: string;
  occurredAt: Date;
}

/** The channels the platform reports. */
export const channels = ["transfer", "card", "pos", "ussd", "wallet", "other"] as const;

const MAX_BATCH = 5_000;
const ENTRY_ID = /^[\x21-\x7e]{1,128}$/;
/** Entries may not be dated in the future (beyond clock skew): windows end on the day of the read. */
const FUTURE_SKEW_MS = 5 * ms.minute;

/** What {@link createLedgerService} returns. */
export type LedgerService = ReturnType<typeof createLedgerService>;

/** UTC day of a time, as `YYYY-MM-DD`. */
export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/**
 * Ledger ingest. One statement per batch inserts the new entries (idempotent by the platform's id) and
 * folds exactly those into the daily roll-ups and the counterparty index, so a snapshot never scans raw
 * entries and a re-sent batch changes nothing.
 */
export function createLedgerService({ clock, counterpartyKey }: { clock: Clock; counterpartyKey: Buffer }) {
  return {
    /** Ingests a batch on `em`, inside its transaction when it has one (a repayment writes its entry with its booking). */
    async ingest(em: Em, entries: LedgerEntryInput[]): Promise<{ inserted: number; duplicates: number }> {
      if (entries.length === 0) return { inserted: 0, duplicates: 0 };
      if (entries.length > MAX_BATCH)
        throw validationFailed({ entries: `at most ${MAX_BATCH} entries per call` });
      const latest = clock.now().getTime() + FUTURE_SKEW_MS;
      entries.forEach((e, i) => {
        const bad = (field: string, why: string) => validationFailed({ [`entries[${i}].${field}`]: why });
        if (!ENTRY_ID.test(e.id)) throw bad("id", "must be 1 to 128 visible ASCII characters");
        if (e.amountKobo <= 0n) throw bad("amountKobo", "must be positive");
        if (e.counterpartyId === "") throw bad("counterpartyId", "is required");
        if (!(channels as readonly string[]).includes(e.channel))
          throw bad("channel", `must be one of ${channels.join(", ")}`);
        if (Number.isNaN(e.occurredAt.getTime()) || e.occurredAt.getTime() > latest)
          throw bad("occurredAt", "must be a time not in the future");
      });
      const users = [...new Set(entries.map((e) => e.userId))];
      const known = await sql<{ id: string }>(em, "select id from users where id = any($1::text[])", [users]);
      if (known.length !== users.length) {
        const missing = users.filter((u) => !known.some((k) => k.id === u));
        throw validationFailed({ userId: `unknown users: ${missing.slice(0, 5).join(", ")}` });
      }
      const run = () =>
        sql<{ inserted: number }>(
          em,
          `with input as (
           select * from unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bytea[], $6::text[], $7::timestamptz[])
             as t (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at)
         ),
         ins as (
           insert into ledger_entries (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, day)
           select id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, (occurred_at at time zone 'UTC')::date
             from input
           on conflict (id) do nothing
           returning user_id, amount_kobo, direction, counterparty_hash, day
         ),
         daily as (
           insert into ledger_daily as d (user_id, day, inflow_kobo, inflow_count, outflow_kobo, outflow_count)
           select user_id, day,
                  coalesce(sum(amount_kobo) filter (where direction = 'IN'), 0),
                  count(*) filter (where direction = 'IN'),
                  coalesce(sum(amount_kobo) filter (where direction = 'OUT'), 0),
                  count(*) filter (where direction = 'OUT')
             from ins group by user_id, day
            -- The same order in every batch, so concurrent batches lock shared rows in the same order.
            order by user_id, day
           on conflict (user_id, day) do update
             set inflow_kobo = d.inflow_kobo + excluded.inflow_kobo,
                 inflow_count = d.inflow_count + excluded.inflow_count,
                 outflow_kobo = d.outflow_kobo + excluded.outflow_kobo,
                 outflow_count = d.outflow_count + excluded.outflow_count
         ),
         parties as (
           insert into ledger_counterparties as c (user_id, direction, counterparty_hash, first_day, last_day)
           select user_id, direction, counterparty_hash, min(day), max(day) from ins group by user_id, direction, counterparty_hash
            order by user_id, direction, counterparty_hash
           on conflict (user_id, direction, counterparty_hash) do update
             set first_day = least(c.first_day, excluded.first_day), last_day = greatest(c.last_day, excluded.last_day)
         )
         select count(*)::int as inserted from ins`,
          [
            entries.map((e) => e.id),
            entries.map((e) => e.userId),
            entries.map((e) => e.amountKobo.toString()),
            entries.map((e) => e.direction),
            entries.map((e) => keyedHash(counterpartyKey, `${e.userId}:${e.counterpartyId}`)),
            entries.map((e) => e.channel),
            entries.map((e) => e.occurredAt),
          ],
        );
      // The statement is atomic, so a deadlock with a concurrent batch is retried whole.
      let rows: { inserted: number }[] = [];
      for (let attempt = 1; ; attempt++) {
        try {
          rows = await run();
          break;
        } catch (err) {
          // Inside a caller's transaction the failed statement has aborted it: the caller retries.
          if ((err as { code?: string }).code !== "40P01" || attempt >= 5 || em.isInTransaction()) throw err;
        }
      }
      const inserted = rows[0]?.inserted ?? 0;
      return { inserted, duplicates: entries.length - inserted };
    },
  };
}
