import autocannon from "autocannon";
import pg from "pg";
import { scopes } from "../src/consent/scopes.ts";
import { type Replica, startReplicatedCluster } from "../test/support/replication.ts";
import {
  type BenchService,
  internalCall,
  partnerWithKey,
  report,
  seedTraders,
  startService,
} from "./support.ts";

const USERS = Number(process.env.BENCH_USERS ?? 2_000);
const HEAVY = Number(process.env.BENCH_HEAVY ?? 20);
const HEAVY_ENTRIES = Number(process.env.BENCH_HEAVY_ENTRIES ?? 5_000);
const LIGHT_ENTRIES = Number(process.env.BENCH_LIGHT_ENTRIES ?? 50);
const READ_USERS = Number(process.env.BENCH_READ_USERS ?? 1_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const REVOKE_EVERY_MS = 100;

const cluster = await startReplicatedCluster();
const replica = cluster.replicas[0] as Replica;
const env = {
  DATABASE_URL: cluster.primaryUrl,
  MASTER_KEY: "ab".repeat(32),
  INTERNAL_TOKEN: `itk_${"b".repeat(32)}`,
  ROLE: "api",
  DB_POOL_SIZE: "5",
};
const plain = await startService(env);
const withReplica = await startService({ ...env, DATABASE_REPLICA_URLS: replica.url });
const primary = new pg.Client({ connectionString: cluster.primaryUrl });
await primary.connect();
const onReplica = new pg.Client({ connectionString: replica.url });
await onReplica.connect();

try {
  const { partnerId, key } = await partnerWithKey(plain);
  const userId = await seedTraders(plain, {
    prefix: "rep",
    phonePrefix: "1",
    users: USERS,
    heavy: HEAVY,
    heavyEntries: HEAVY_ENTRIES,
    lightEntries: LIGHT_ENTRIES,
  });

  // Readers (the heavy traders among them), and the users whose consents are revoked during the rounds.
  const readers = [
    ...Array.from({ length: HEAVY }, (_, i) => i),
    ...Array.from({ length: READ_USERS }, (_, i) => HEAVY + i),
  ];
  // Enough for every round and the warm-ups: one revocation every REVOKE_EVERY_MS through each.
  const revocations = 2 * (ROUNDS * SECONDS + 5) * Math.ceil(1000 / REVOKE_EVERY_MS) + 20;
  const revocable = Array.from({ length: revocations }, (_, i) => HEAVY + READ_USERS + i).filter(
    (u) => u < USERS,
  );
  const consentOf = new Map<string, string>();
  const everyone = [...readers, ...revocable];
  for (let i = 0; i < everyone.length; i += 20) {
    await Promise.all(
      everyone.slice(i, i + 20).map(async (u) => {
        const { consent } = await internalCall(plain, "internal.v1.ConsentAdminService/GrantConsent", {
          userId: userId(u),
          partnerId,
          scopes: [...scopes],
          ledgerWindowDays: 90,
          maxLedgerWindowDays: 365,
        });
        consentOf.set(userId(u), consent.id);
      }),
    );
  }
  await primary.query("vacuum (analyze)");
  await primary.query("checkpoint");
  await cluster.waitCaughtUp();

  const revokedAt = new Map<string, number>();
  let nextRevocable = 0;
  /** Saturation on `s` while a consent is revoked every 100 ms through it; served and violations counted. */
  const round = async (s: BenchService, seconds: number) => {
    let violations = 0;
    let revoked = 0;
    const mine = revocable.slice(
      nextRevocable,
      nextRevocable + Math.ceil((seconds * 1000) / REVOKE_EVERY_MS) + 2,
    );
    nextRevocable += mine.length;
    const paths = [...readers, ...mine].map((u) => userId(u));
    let i = 0;
    let running = true;
    const revoker = (async () => {
      for (const u of mine) {
        if (!running) break;
        const res = await fetch(`${s.partnerUrl}/partner/v1/consents/${consentOf.get(userId(u))}/revoke`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: "{}",
        });
        if (res.status === 200) {
          revokedAt.set(userId(u), performance.now());
          revoked++;
        }
        await new Promise((r) => setTimeout(r, REVOKE_EVERY_MS));
      }
    })();
    const result = await autocannon({
      url: s.partnerUrl,
      connections: 50,
      duration: seconds,
      headers: { authorization: `Bearer ${key}` },
      requests: [
        {
          setupRequest: ((req: Record<string, unknown>, context: Record<string, unknown>) => {
            const user = paths[i++ % paths.length] as string;
            context.user = user;
            context.sentAt = performance.now();
            req.path = `/partner/v1/users/${user}/snapshot?ledger_window_days=${[30, 90, 365][i % 3]}`;
            return req;
          }) as never,
          onResponse: ((status: number, _body: string, context: Record<string, unknown>) => {
            const at = revokedAt.get(context.user as string);
            if (status === 200 && at !== undefined && at <= (context.sentAt as number)) violations++;
          }) as never,
        },
      ],
    });
    running = false;
    await revoker;
    return { result, violations, revoked };
  };

  const activeMs = async () =>
    Number(
      (
        await primary.query<{ ms: number }>(
          "select active_time as ms from pg_stat_database where datname = current_database()",
        )
      ).rows[0]?.ms ?? 0,
    );
  const statementMs = async (c: pg.Client) =>
    Number(
      (
        await c.query<{ ms: number }>(
          "select coalesce(sum(total_exec_time), 0) as ms from pg_stat_statements",
        )
      ).rows[0]?.ms ?? 0,
    );
  const idle = () => new Promise((r) => setTimeout(r, 11_000));

  // Warm-up: every reader read once through each process (their pages in both servers' buffers).
  for (const s of [plain, withReplica]) await round(s, 5);
  const figures: Record<
    string,
    {
      reads: number;
      activeMs: number;
      statementMs: number;
      replicaMs: number;
      perSecond: number;
      violations: number;
      revoked: number;
    }
  > = {
    none: { reads: 0, activeMs: 0, statementMs: 0, replicaMs: 0, perSecond: 0, violations: 0, revoked: 0 },
    replica: { reads: 0, activeMs: 0, statementMs: 0, replicaMs: 0, perSecond: 0, violations: 0, revoked: 0 },
  };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, s] of [
      ["none", plain],
      ["replica", withReplica],
    ] as const) {
      await idle();
      await primary.query("select pg_stat_statements_reset()");
      await onReplica.query("select pg_stat_statements_reset()");
      const active = await activeMs();
      const { result, violations, revoked } = await round(s, SECONDS);
      const primaryStatements = await statementMs(primary);
      const replicaStatements = await statementMs(onReplica);
      await idle();
      const f = figures[name] as (typeof figures)["none"];
      f.reads += result.requests.total;
      f.activeMs += (await activeMs()) - active;
      f.statementMs += primaryStatements;
      f.replicaMs += replicaStatements;
      f.perSecond += result.requests.average / ROUNDS;
      f.violations += violations;
      f.revoked += revoked;
      report({
        bench: "replicas",
        figure: `round ${r + 1}: snapshot reads at saturation (50 connections), ${name === "none" ? "no replica" : "one replica"}`,
        requestsPerSecond: Math.round(result.requests.average),
        p50Ms: result.latency.p50,
        p99Ms: result.latency.p99,
        consentsRevoked: revoked,
        refused: result.non2xx,
        primaryActiveMsPerRead: Number((((await activeMs()) - active) / result.requests.total).toFixed(4)),
        primaryStatementMsPerRead: Number((primaryStatements / result.requests.total).toFixed(4)),
        replicaStatementMsPerRead: Number((replicaStatements / result.requests.total).toFixed(4)),
        revokedConsentsServed: violations,
      });
    }
  }
  const per = (f: (typeof figures)["none"], ms: number) => ms / f.reads;
  const none = figures.none as (typeof figures)["none"];
  const rep = figures.replica as (typeof figures)["none"];
  const ratio = per(rep, rep.activeMs) / per(none, none.activeMs);
  const statementRatio = per(rep, rep.statementMs) / per(none, none.statementMs);
  report({
    bench: "replicas",
    figure:
      "the primary's database time per snapshot read with one replica, against none (same run, alternating rounds)",
    noReplica: {
      requestsPerSecond: Math.round(none.perSecond),
      primaryActiveMsPerRead: Number(per(none, none.activeMs).toFixed(4)),
      primaryStatementMsPerRead: Number(per(none, none.statementMs).toFixed(4)),
    },
    oneReplica: {
      requestsPerSecond: Math.round(rep.perSecond),
      primaryActiveMsPerRead: Number(per(rep, rep.activeMs).toFixed(4)),
      primaryStatementMsPerRead: Number(per(rep, rep.statementMs).toFixed(4)),
      replicaStatementMsPerRead: Number(per(rep, rep.replicaMs).toFixed(4)),
    },
    activeTimeRatio: Number(ratio.toFixed(3)),
    statementTimeRatio: Number(statementRatio.toFixed(3)),
    consentsRevoked: none.revoked + rep.revoked,
    revokedConsentsServed: none.violations + rep.violations,
    bar: "ratio <= 0.20, no snapshot of a revoked consent served",
    meets: ratio <= 0.2 && statementRatio <= 0.2 && none.violations + rep.violations === 0,
  });
} finally {
  await primary.end();
  await onReplica.end();
  await plain.stop();
  await withReplica.stop();
  await cluster.stop();
}
