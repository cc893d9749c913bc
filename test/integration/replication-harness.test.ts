import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgbouncerAvailable, startPgBouncer } from "../support/pgbouncer.ts";
import { type Replica, type ReplicatedCluster, startReplicatedCluster } from "../support/replication.ts";

/** One query on a connection of its own. */
async function query<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

async function hasRow(url: string, marker: string): Promise<boolean> {
  const rows = await query(url, "select 1 from harness_probe where marker = $1", [marker]);
  return rows.length === 1;
}

// The harness the read-replica and pooling tests stand on: real streaming hot standbys and a real PgBouncer,
// which must behave as production's do (lag, pauses, restarts) for those tests to mean anything.
describe("replication and pgbouncer test harness", () => {
  let cluster: ReplicatedCluster;
  let replica: Replica;
  let startedInMs = 0;

  beforeAll(async () => {
    const started = Date.now();
    cluster = await startReplicatedCluster({ replicas: 1 });
    startedInMs = Date.now() - started;
    replica = cluster.replicas[0] as Replica;
    await query(cluster.primaryUrl, "create table harness_probe (marker text primary key)");
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 120_000);

  it("starts a primary with the service's schema and a streaming replica of it", async () => {
    process.stderr.write(`startReplicatedCluster took ${startedInMs} ms\n`);
    const migrated =
      "select (select count(*) from schema_migrations)::int as migrations, (select count(*) from pgboss.queue)::int as queues";
    const [onReplica] = await query<{ migrations: number; queues: number }>(replica.url, migrated);
    expect(onReplica?.migrations).toBeGreaterThan(0);
    expect(onReplica?.queues).toBeGreaterThan(0);
    expect(await query(cluster.primaryUrl, migrated)).toEqual([onReplica]);
    const [{ recovering } = { recovering: false }] = await query<{ recovering: boolean }>(
      replica.url,
      "select pg_is_in_recovery() as recovering",
    );
    expect(recovering).toBe(true);
    await query(cluster.primaryUrl, "insert into harness_probe values ('first')");
    await cluster.waitCaughtUp();
    expect(await hasRow(replica.url, "first")).toBe(true);
  });

  it("holds a change back from a replica whose replay is paused, and applies it once resumed", async () => {
    await replica.pauseReplay();
    try {
      await query(cluster.primaryUrl, "insert into harness_probe values ('while-paused')");
      // waitCaughtUp skips a paused replica; it returns once the others have the row, and this one still has not.
      await cluster.waitCaughtUp();
      expect(await hasRow(cluster.primaryUrl, "while-paused")).toBe(true);
      expect(await hasRow(replica.url, "while-paused")).toBe(false);
    } finally {
      await replica.resumeReplay();
    }
    await cluster.waitCaughtUp();
    expect(await hasRow(replica.url, "while-paused")).toBe(true);
  });

  it("counts a statement on the server it ran on alone", async () => {
    await replica.resetStatements();
    await cluster.resetPrimaryStatements();
    await query(replica.url, "select count(*) as harness_marker_on_replica from harness_probe");
    await query(replica.url, "select count(*) as harness_marker_on_replica from harness_probe");
    expect(await replica.statements("harness_marker_on_replica")).toBe(2);
    expect(await cluster.primaryStatements("harness_marker_on_replica")).toBe(0);
    await query(cluster.primaryUrl, "select 1 as harness_marker_on_primary");
    expect(await cluster.primaryStatements("harness_marker_on_primary")).toBe(1);
    expect(await replica.statements("harness_marker_on_primary")).toBe(0);
    await replica.resetStatements();
    expect(await replica.statements("harness_marker_on_replica")).toBe(0);
  });

  it.skipIf(!pgbouncerAvailable())(
    "pools 20 parallel clients through pgbouncer in transaction mode",
    async () => {
      const bouncer = await startPgBouncer(cluster.primaryUrl, {
        poolMode: "transaction",
        defaultPoolSize: 5,
      });
      try {
        const results = await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const rows = await query<{ n: number }>(bouncer.url, "select $1::int as n", [i]);
            return rows[0]?.n;
          }),
        );
        expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i));
        const pools = await query<{ database: string; pool_mode: string }>(bouncer.adminUrl, "show pools");
        expect(pools.find((p) => p.database === "partner_api")?.pool_mode).toBe("transaction");
      } finally {
        await bouncer.stop();
      }
    },
  );

  it("resumes streaming when a stopped replica starts again", async () => {
    await replica.stop();
    await query(cluster.primaryUrl, "insert into harness_probe values ('while-replica-down')");
    await replica.start();
    await cluster.waitCaughtUp();
    expect(await hasRow(replica.url, "while-replica-down")).toBe(true);
  });

  it("reconnects the replica by itself after the primary restarts", async () => {
    await cluster.restartPrimary();
    await query(cluster.primaryUrl, "insert into harness_probe values ('after-primary-restart')");
    await cluster.waitCaughtUp();
    expect(await hasRow(replica.url, "after-primary-restart")).toBe(true);
    expect(await replica.replayLsn()).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
  });
});
