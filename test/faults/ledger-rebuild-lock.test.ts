import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateEntries, ingestEntries } from "../factories/ledger.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// A user's ledger lock: ingest batches hold it shared, a rebuild (and a sandbox reset) exclusively. A rebuild
// or a batch waits a bounded time for it: while something else holds it (a long rebuild, an operator's own
// lock), the call answers UNAVAILABLE, retryable, after its 5-second lock deadline instead of holding a pooled
// connection for as long as the holder does; once the user is free, the same call succeeds. Nothing waits for
// another user's lock: a rebuild holds up only the batches and rebuilds of its own users.

let t: TestApp;
let holder: pg.Client;
beforeAll(async () => {
  t = await startTestApp();
  holder = new pg.Client({ connectionString: t.databaseUrl });
  await holder.connect();
});
afterAll(async () => {
  await holder?.end();
  await t?.stop();
});

/** Holds a user's ledger lock as a rebuild of that user does, until `holder` rolls back. */
const holdAsRebuild = async (userId: string) => {
  await holder.query("begin");
  await holder.query("select pg_advisory_xact_lock(hashtextextended('ledger_user:' || $1, 0))", [userId]);
};
/** Lock waits still queued in this test's database (none once a refused call has let go); other files' are not ours. */
const waiting = async () =>
  (
    await holder.query<{ n: number }>(
      `select count(*)::int as n from pg_locks
        where not granted and database = (select oid from pg_database where datname = current_database())`,
    )
  ).rows[0]?.n;
const refusal = async (call: Promise<unknown>) => {
  const started = performance.now();
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  return {
    code: err === undefined ? undefined : ConnectError.from(err).code,
    waited: performance.now() - started,
  };
};

describe("a user's ledger lock", () => {
  it("a rebuild answers UNAVAILABLE at its lock deadline, holds nothing after, and succeeds once the user is free", async () => {
    const { userId } = await createUser(t);
    await ingestEntries(t, generateEntries(userId, 50));
    await holdAsRebuild(userId);
    const refused = await refusal(t.internal.ingest.rebuildLedgerRollups({ userIds: [userId] }));
    expect(refused.code).toBe(Code.Unavailable);
    expect(refused.waited).toBeGreaterThanOrEqual(4_900);
    expect(await waiting()).toBe(0);
    await holder.query("rollback");
    expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: [userId] })).toMatchObject({
      entries: 50,
    });
  });

  it("a rebuild waits for a rebuild of the same user only: another user's rebuild runs meanwhile", async () => {
    const [a, b] = [await createUser(t), await createUser(t)];
    await ingestEntries(t, generateEntries(a.userId, 20));
    await ingestEntries(t, generateEntries(b.userId, 30));
    await holdAsRebuild(a.userId);
    // Had it waited for A, it would have been refused at its 5-second deadline.
    expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: [b.userId] })).toMatchObject({
      entries: 30,
    });
    const refused = await refusal(t.internal.ingest.rebuildLedgerRollups({ userIds: [b.userId, a.userId] }));
    expect(refused.code).toBe(Code.Unavailable);
    await holder.query("rollback");
    expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: [a.userId] })).toMatchObject({
      entries: 20,
    });
  });

  it("ingest of other users runs through a rebuild; a batch naming its user waits 5 s at most, then lands once free", async () => {
    const [a, b] = [await createUser(t), await createUser(t)];
    await holdAsRebuild(a.userId);
    // Other users' batches do not wait: 20 of them land while A is held (each would take 5 s if they waited).
    const started = performance.now();
    for (let i = 0; i < 20; i++)
      expect((await ingestEntries(t, generateEntries(b.userId, 100))).inserted).toBe(100);
    expect(performance.now() - started).toBeLessThan(4_900);
    // A batch with one entry of A among others is refused whole, retryable, and leaves nothing behind.
    const mixed = [...generateEntries(b.userId, 10), ...generateEntries(a.userId, 1)];
    const refused = await refusal(ingestEntries(t, mixed));
    expect(refused.code).toBe(Code.Unavailable);
    expect(refused.waited).toBeGreaterThanOrEqual(4_900);
    expect(await waiting()).toBe(0);
    await holder.query("rollback");
    // The platform sends the same batch again: every entry lands, once.
    expect(await ingestEntries(t, mixed)).toEqual({ inserted: 11, duplicates: 0 });
    const { rows } = await holder.query<{ n: number }>(
      "select coalesce(sum(inflow_count + outflow_count), 0)::int as n from ledger_daily where user_id = $1",
      [a.userId],
    );
    expect(rows[0]?.n).toBe(1);
  });
});
