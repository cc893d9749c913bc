import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentAdminService } from "../../gen/internal/v1/users_pb.ts";
import { addDays, lagosDay } from "../../src/platform/dates.ts";
import { productionBorrowers, productionLender } from "../support/borrowers.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { settledPayouts } from "../support/payouts.ts";
import { type PgBouncer, pgbouncerAvailable, startPgBouncer } from "../support/pgbouncer.ts";
import { type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { type ReplicatedCluster, startReplicatedCluster } from "../support/replication.ts";
import { eventually } from "../support/wait.ts";

// An api and a worker process with everything past one database server in the path: DATABASE_URL through a
// real PgBouncer in transaction mode, DATABASE_DIRECT_URL to the primary, reads on a real streaming replica. The
// primary is stopped for two seconds and started again under steady writes (disbursements, each retried with
// its idempotency key) and reads (snapshots and gets). Then: no 500 and no call left unanswered, 503 while the
// primary was away, every write applied once, every payout made once, and reads on the replica again after.
const available = pgbouncerAvailable();
const masterKey = randomBytes(32).toString("hex");
const internalToken = `itk_${randomBytes(24).toString("base64url")}`;
let cluster: ReplicatedCluster;
let bouncer: PgBouncer;
let fake: FakePaystack;
const processes: ServiceProcess[] = [];

beforeAll(async () => {
  if (!available) return;
  cluster = await startReplicatedCluster();
  const owner = new pg.Client({ connectionString: cluster.primaryUrl });
  await owner.connect();
  await owner.query("alter role current_user in database partner_api set statement_timeout = '30s'");
  await owner.query(
    "alter role current_user in database partner_api set idle_in_transaction_session_timeout = '10s'",
  );
  await owner.end();
  // As docs/operations.md recommends: PgBouncer tries the server again a second after a failed login, not 15, and
  // a query waits at most 5 s for a server connection (then the service answers 503).
  bouncer = await startPgBouncer(cluster.primaryUrl, {
    defaultPoolSize: 10,
    settings: { server_login_retry: 1, query_wait_timeout: 5 },
  });
  fake = await startFakePaystack();
}, 120_000);

afterAll(async () => {
  for (const p of processes)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await Promise.all(processes.map((p) => p.exited));
  await fake?.close();
  await bouncer?.stop();
  await cluster?.stop();
}, 60_000);

const start = (role: string) =>
  startServiceProcess({
    ROLE: role,
    DATABASE_URL: bouncer.url,
    DATABASE_DIRECT_URL: cluster.primaryUrl,
    DATABASE_REPLICA_URLS: cluster.replicas[0]?.url ?? "",
    MASTER_KEY: masterKey,
    INTERNAL_TOKEN: internalToken,
    PAYMENT_PROVIDER_URL: fake.url,
    PAYMENT_PROVIDER_SECRET_KEY: fake.secretKey,
    PAYMENT_PROVIDER_TIMEOUT_MS: "3000",
    SMS_PROVIDER_URL: unusedSmsProvider.baseUrl,
    SMS_PROVIDER_API_KEY: unusedSmsProvider.apiKey,
    PAYOUT_RESUME_AFTER_MS: "3000",
    RATE_LIMIT_WRITE: "100000:100000",
    RATE_LIMIT_READ: "100000:100000",
    DISBURSEMENTS_PER_USER_PER_DAY: "100000",
    // Reads pile up while the primary is away: the point is their answers, not the limit on reads in flight.
    SNAPSHOT_CONCURRENCY_PER_KEY: "1000",
    DB_POOL_SIZE: "5",
  }).then((p) => {
    processes.push(p);
    return p;
  });

type Answer = { at: number; status: number; kind: "write" | "read"; code?: string };

describe.skipIf(!available)("the primary restarted under load, behind PgBouncer, with a replica", () => {
  it("answers 503 meanwhile (never a 500 or a hang), applies each write and pays each payout once, and reads on the replica again", async () => {
    const api = await start("api");
    await start("worker");
    const { internal, partnerId, key } = await productionLender(
      api.internalUrl ?? "",
      internalToken,
      "Failover Lending",
    );
    const users = await productionBorrowers(internal, partnerId, 5, "failover");
    const partnerUrl = api.partnerUrl ?? "";
    const answers: Answer[] = [];
    /** One call with a deadline: status 0 is a call the service left unanswered for 15 s. */
    const call = async (kind: Answer["kind"], path: string, init: RequestInit = {}) => {
      let status = 0;
      let text = "";
      try {
        const res = await fetch(`${partnerUrl}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${key}`, ...init.headers },
          signal: AbortSignal.timeout(15_000),
        });
        status = res.status;
        text = await res.text();
      } catch {
        status = 0;
      }
      // The error's code says which refusal it was, should an answer other than 200 or 503 come.
      const code =
        status !== 200 && text.startsWith("{") ? (JSON.parse(text) as { code?: string }).code : undefined;
      answers.push({ at: Date.now(), status, kind, ...(code && { code }) });
      return { status, text };
    };

    const created = new Map<string, string>();
    const platform = { partnerUrl, internal: { consents: internal(ConsentAdminService) } };
    const dueDate = addDays(lagosDay(new Date()), 1);
    const write = async (reference: string, userId: string) => {
      const body = JSON.stringify({
        userId,
        principalKobo: "1000000",
        destination: "BANK",
        reference,
        repaymentSchedule: { installments: [{ dueDate, amountKobo: "1100000" }] },
      });
      for (;;) {
        const res = await call("write", "/partner/v1/disbursements", {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": reference },
          body,
        });
        if (res.status === 200) {
          const id = JSON.parse(res.text).id as string;
          created.set(reference, id);
          for (let attempt = 0; ; attempt++) {
            try {
              await acceptMandate(platform, key, id);
              break;
            } catch (err) {
              if (attempt > 100) throw err;
              await new Promise((r) => setTimeout(r, 200));
            }
          }
          return;
        }
        if (res.status !== 503 && res.status !== 409) throw new Error(`${res.status} ${res.text}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    let running = true;
    let n = 0;
    const work: Promise<unknown>[] = [];
    const writes = (async () => {
      while (running) {
        work.push(write(`failover-${n}`, users[n % users.length] ?? ""));
        n++;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const reads = (async () => {
      for (let i = 0; running; i++) {
        const user = users[i % users.length] ?? "";
        work.push(call("read", `/partner/v1/users/${user}/snapshot`));
        const id = [...created.values()].at(-1);
        if (id) work.push(call("read", `/partner/v1/disbursements/${id}`));
        await new Promise((r) => setTimeout(r, 40));
      }
    })();

    await new Promise((r) => setTimeout(r, 2_000));
    const downAt = Date.now();
    await cluster.restartPrimary(2_000);
    const upAt = Date.now();
    // Until the pooler and the service are connected again, answers may still be 503.
    await eventually(
      async () => (await call("read", `/partner/v1/users/${users[0]}/snapshot`)).status === 200,
      {
        timeoutMs: 30_000,
        what: "reads answered again once the primary is back",
      },
    );
    const backAt = Date.now();
    await new Promise((r) => setTimeout(r, 3_000));
    running = false;
    await Promise.all([writes, reads]);
    await Promise.all(work);

    const byStatus: Record<string, number> = {};
    for (const a of answers) byStatus[`${a.kind} ${a.status}`] = (byStatus[`${a.kind} ${a.status}`] ?? 0) + 1;
    console.log(JSON.stringify({ writes: n, downMs: upAt - downAt, recoveredMs: backAt - upAt, byStatus }));
    // Never a 500, never a call left unanswered; 503 while the primary was away (the fault was felt).
    expect(answers.filter((a) => a.status === 0 || (a.status >= 500 && a.status !== 503))).toEqual([]);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    expect(answers.some((a) => a.status === 503 && a.at >= downAt)).toBe(true);
    expect(answers.filter((a) => a.status !== 200 && a.at > backAt + 1_000)).toEqual([]);
    // Nor did the api process fail anything else: the mandate pages the people opened meanwhile answered 503 too.
    expect(api.logs.filter((l) => l.level === "error").map((l) => l.msg)).toEqual([]);

    const db = new pg.Client({ connectionString: cluster.primaryUrl });
    await db.connect();
    try {
      // Every write applied once, the id its answer gave; every payout made once at the provider.
      const { delivered, cancelled } = await settledPayouts(db, partnerId, n, (ref) => created.get(ref));
      expect(cancelled).toEqual([]);
      for (const id of delivered) expect(fake.transfers.has(id), id).toBe(true);
      expect(fake.calls.filter((c) => c === "POST /transfer").length).toBe(delivered.length);
    } finally {
      await db.end();
    }

    // The replica serves reads again.
    const replica = cluster.replicas[0];
    await cluster.waitCaughtUp();
    await replica?.resetStatements();
    await eventually(
      async () => {
        expect((await call("read", `/partner/v1/users/${users[0]}/snapshot`)).status).toBe(200);
        return ((await replica?.statements("snapshot_row")) ?? 0) > 0;
      },
      { timeoutMs: 15_000, what: "snapshot reads on the replica again" },
    );
  }, 300_000);
});
