import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateEntries, ingestEntries } from "../factories/ledger.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// A ledger rebuild waits a bounded time for the ledger: while something else holds it (a long rebuild, an
// operator's own lock), a call answers UNAVAILABLE, retryable, after its 5-second lock deadline instead of
// holding a pooled connection for as long as the holder does; once the ledger is free, the same call succeeds.
// A rebuild of one user waits only for rebuilds of that user: others run side by side.

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

describe("ledger rebuild against a held ledger", () => {
  it("answers UNAVAILABLE at its lock deadline, holds nothing after, and succeeds once the ledger is free", async () => {
    const { userId } = await createUser(t);
    await ingestEntries(t, generateEntries(userId, 50));
    await holder.query("begin");
    await holder.query("lock table ledger_entries in share row exclusive mode");
    const started = performance.now();
    const refused = await t.internal.ingest.rebuildLedgerRollups({ userIds: [userId] }).catch((e) => e);
    const waited = performance.now() - started;
    expect(ConnectError.from(refused).code).toBe(Code.Unavailable);
    expect(waited).toBeGreaterThanOrEqual(4_900);
    // The refused call left no transaction of its own waiting on the ledger.
    const { rows } = await holder.query<{ n: number }>(
      `select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation
        where c.relname = 'ledger_entries' and not l.granted`,
    );
    expect(rows[0]?.n).toBe(0);
    await holder.query("rollback");
    expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: [userId] })).toMatchObject({
      entries: 50,
    });
  });

  it("waits for a rebuild of the same user only: another user's rebuild runs meanwhile", async () => {
    const [a, b] = [await createUser(t), await createUser(t)];
    await ingestEntries(t, generateEntries(a.userId, 20));
    await ingestEntries(t, generateEntries(b.userId, 30));
    // What a rebuild of user A holds while it runs: the ledger in SHARE mode and A's own lock.
    await holder.query("begin");
    await holder.query("lock table ledger_entries in share mode");
    await holder.query("select pg_advisory_xact_lock(hashtextextended('ledger_rebuild:' || $1, 0))", [
      a.userId,
    ]);
    // Had it waited for either, it would have been refused at its 5-second deadline.
    expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: [b.userId] })).toMatchObject({
      entries: 30,
    });
    const refused = await t.internal.ingest
      .rebuildLedgerRollups({ userIds: [b.userId, a.userId] })
      .catch((e) => e);
    expect(ConnectError.from(refused).code).toBe(Code.Unavailable);
    await holder.query("rollback");
    expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: [a.userId] })).toMatchObject({
      entries: 20,
    });
  });
});
