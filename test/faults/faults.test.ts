import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentAdminService } from "../../gen/internal/v1/users_pb.ts";
import { addDays, lagosDay } from "../../src/platform/dates.ts";
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from "../../src/platform/db/embedded.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { productionBorrowers, productionLender } from "../support/borrowers.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { settledPayouts } from "../support/payouts.ts";
import { type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// Two api and two worker processes on one PostgreSQL of their own, under steady load; a worker and an api
// process killed with SIGKILL mid-run; PostgreSQL stopped and started again mid-run. Then: every event
// delivered, no payout or debit made twice, no idempotent write applied twice, /readyz false while the
// database was down and true after, and no 5xx once it was back.
const logger = createLogger({ level: "silent" });
const masterKey = randomBytes(32).toString("hex");
const internalToken = `itk_${randomBytes(24).toString("base64url")}`;
let dataDir: string;
let port: number;
let db: EmbeddedDatabase | undefined;
let fake: FakePaystack;
let receiver: TestReceiver;
const processes: ServiceProcess[] = [];

const startDb = async () => {
  db = await startEmbeddedPostgres({ dataDir, database: "faults", logger, port });
  return db;
};
const env = (role: string) => ({
  ROLE: role,
  DATABASE_URL: db?.url ?? "",
  MASTER_KEY: masterKey,
  INTERNAL_TOKEN: internalToken,
  ALLOW_LOCAL_WEBHOOKS: "true",
  // Production payouts through the fake provider, and their events delivered to the loopback receiver, are the
  // point: production subscriptions get the local rules too (a switch for tests only, read by src/main.ts).
  TEST_PRODUCTION_LOCAL_WEBHOOKS: "true",
  PAYMENT_PROVIDER_URL: fake.url,
  PAYMENT_PROVIDER_SECRET_KEY: fake.secretKey,
  PAYMENT_PROVIDER_TIMEOUT_MS: "3000",
  // The people answer through the platform's prompt sessions; production needs an SMS provider configured.
  SMS_PROVIDER_URL: unusedSmsProvider.baseUrl,
  SMS_PROVIDER_API_KEY: unusedSmsProvider.apiKey,
  PAYOUT_RESUME_AFTER_MS: "3000",
  WEBHOOK_SWEEP_INTERVAL_MS: "1000",
  RATE_LIMIT_WRITE: "100000:100000",
  RATE_LIMIT_READ: "100000:100000",
  // Many loans for each of ten users in one day: the load is the point, not the per-user daily limit.
  DISBURSEMENTS_PER_USER_PER_DAY: "100000",
  DB_POOL_SIZE: "5",
});
// The loans fall due in two days; a worker started with its clock past that debits them. Only once every
// mandate is accepted: a worker whose clock sees a repayment due also sees its unanswered mandate lapsed, and
// would cancel the ones the people were still answering (as many as the machine was slow).
const DUE_IN_DAYS = 2;
const start = async (role: string, clockAheadDays = 0) => {
  const p = await startServiceProcess({
    ...env(role),
    TEST_CLOCK_OFFSET_MS: String(clockAheadDays * 86_400_000),
  });
  processes.push(p);
  return p;
};

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-faults-"));
  await fs.chmod(dataDir, 0o755); // the embedded PostgreSQL may run as another user
  port = await freePort();
  await startDb();
  fake = await startFakePaystack();
  receiver = await startReceiver();
}, 120_000);

afterAll(async () => {
  for (const p of processes)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await Promise.all(processes.map((p) => p.exited));
  await receiver?.close();
  await fake?.close();
  await db?.stop().catch(() => undefined);
  await fs.rm(dataDir, { recursive: true, force: true });
}, 60_000);

type Attempt = { at: number; status: number; api: string; code?: string };

describe("two api and two worker processes under load, through crashes and a database restart", () => {
  it("deliver every event, pay and debit nothing twice, apply no idempotent write twice, and answer no 5xx after recovery", async () => {
    const api1 = await start("api"); // migrates first
    const api2 = await start("api");
    const worker1 = await start("worker");
    const worker2 = await start("worker");
    // A partner with a live key, a webhook subscription, and users with consent and payment instruments.
    const { internal, partnerId, key } = await productionLender(
      api1.internalUrl ?? "",
      internalToken,
      "Fault Lending",
    );
    const hook = await fetch(`${api1.partnerUrl}/partner/v1/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ url: receiver.url, events: ["DISBURSEMENT_DELIVERED"] }),
    });
    expect(hook.status).toBe(200);
    const users = await productionBorrowers(internal, partnerId, 10, "fault");

    // Steady load: each write has its own idempotency key and is retried with it until it gets an answer
    // that is not a 5xx or a network error, on whichever api process is alive.
    const apis = new Map([
      ["api1", api1.partnerUrl ?? ""],
      ["api2", api2.partnerUrl ?? ""],
    ]);
    const attempts: Attempt[] = [];
    const results = new Map<string, { id: string; body: string }>();
    // In two days in Lagos, as the service counts days (UTC's day is not Lagos's from 23:00 UTC).
    const dueDate = addDays(lagosDay(new Date()), DUE_IN_DAYS);
    let n = 0;
    let running = true;
    const write = async (idemKey: string, user: string) => {
      const body = JSON.stringify({
        userId: user,
        principalKobo: "1000000",
        destination: "BANK",
        reference: idemKey,
        repaymentSchedule: { installments: [{ dueDate, amountKobo: "1100000" }] },
      });
      for (let attempt = 0; ; attempt++) {
        const names = [...apis.keys()];
        const name = names[(n + attempt) % names.length] ?? "api1";
        let status = 0;
        let text = "";
        try {
          const res = await fetch(`${apis.get(name)}/partner/v1/disbursements`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${key}`,
              "content-type": "application/json",
              "idempotency-key": idemKey,
            },
            body,
            signal: AbortSignal.timeout(5_000),
          });
          status = res.status;
          text = await res.text();
        } catch {
          status = 0; // no answer: the process died or the connection was cut
        }
        // The error's code says which refusal it was, should an answer other than 200, 409 or 503 come.
        const code =
          status !== 200 && text.startsWith("{") ? (JSON.parse(text) as { code?: string }).code : undefined;
        attempts.push({ at: Date.now(), status, api: name, ...(code && { code }) });
        if (status === 200) {
          results.set(idemKey, { id: JSON.parse(text).id, body: text });
          await accept(JSON.parse(text).id);
          return;
        }
        // 409: this key's earlier attempt, given up on by its client, is still being answered.
        if (status >= 400 && status < 500 && status !== 409) throw new Error(`${status} ${text}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    // The person accepts each mandate at once, through the platform's prompt session on api1, retried while
    // the database is away.
    const platform = {
      partnerUrl: api1.partnerUrl ?? "",
      internal: { consents: internal(ConsentAdminService) },
    };
    const accept = async (id: string) => {
      let last: unknown;
      for (let attempt = 0; attempt < 300; attempt++) {
        try {
          await acceptMandate(platform, key, id);
          return;
        } catch (err) {
          last = err;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      throw new Error(`mandate ${id} was never answered: ${String(last)}`);
    };
    const inFlight: Promise<void>[] = [];
    const load = (async () => {
      while (running) {
        const idemKey = `fault-${n}`;
        inFlight.push(write(idemKey, users[n % users.length] ?? ""));
        n++;
        await new Promise((r) => setTimeout(r, 40));
      }
    })();
    const readyz = async (url: string) =>
      fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) })
        .then((r) => r.status)
        .catch(() => 0);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

    await sleep(2_000);
    worker1.child.kill("SIGKILL");
    await sleep(1_500);
    api2.child.kill("SIGKILL");
    apis.delete("api2");
    await sleep(1_500);

    await db?.stop();
    const notReady = await eventually(
      async () => ((await readyz(api1.partnerUrl ?? "")) === 503 ? true : undefined),
      {
        timeoutMs: 10_000,
        what: "/readyz 503 while the database is down",
      },
    );
    expect(notReady).toBe(true);
    await sleep(2_000);
    await startDb();
    await eventually(async () => ((await readyz(api1.partnerUrl ?? "")) === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: "/readyz 200 once the database is back",
    });
    const backAt = Date.now();
    await sleep(4_000);
    running = false;
    await load;
    await Promise.all(inFlight);

    const client = new pg.Client({ connectionString: db?.url });
    await client.connect();
    try {
      // Every mandate accepted, through the crashes and the restart, and every payout delivered, each exactly once
      // at the provider, never even attempted twice.
      const settled = await settledPayouts(client, partnerId, n, (ref) => results.get(ref)?.id);
      expect(settled.cancelled).toEqual([]);
      const paid = n;
      for (const id of settled.delivered) expect(fake.transfers.has(id), id).toBe(true);
      expect(fake.transfers.size).toBe(paid);
      expect(fake.calls.filter((c) => c === "POST /transfer").length).toBe(paid);
      const booked = await client.query(
        "select disbursement_id from book_entries where partner_id = $1 and kind = 'PRINCIPAL_OUT'",
        [partnerId],
      );
      expect(booked.rowCount).toBe(paid);

      // The workers are replaced by one whose clock is a day past the loans' due date (a debit goes at 07:00 UTC on
      // it, and the Lagos day may be UTC's next), alone: a sweep goes to whichever worker asks first. A worker's
      // start debits what has fallen due without waiting for the minute's sweep.
      worker2.child.kill("SIGTERM");
      await worker2.exited;
      await start("worker", DUE_IN_DAYS + 1);
      // Every repayment debited once: one charge per installment at the provider, booked once.
      await eventually(
        async () => {
          const open = await client.query(
            `select 1 from installments i join disbursements d on d.id = i.disbursement_id
              where d.partner_id = $1 and d.status = 'DELIVERED' and i.status <> 'COLLECTED'`,
            [partnerId],
          );
          return open.rowCount === 0;
        },
        { timeoutMs: 150_000, what: "every repayment COLLECTED" },
      );
      expect(fake.charges.size).toBe(paid);
      expect(fake.calls.filter((c) => c === "POST /transaction/charge_authorization").length).toBe(paid);
      const repaid = await client.query(
        "select 1 from book_entries where partner_id = $1 and kind = 'REPAYMENT_IN'",
        [partnerId],
      );
      expect(repaid.rowCount).toBe(paid);
      const ledger = await client.query("select 1 from ledger_entries where id like 'repayment:%'", []);
      expect(ledger.rowCount).toBe(paid);

      // Every event delivered at least once.
      const events = (
        await client.query<{ id: string }>(
          "select id from events where partner_id = $1 and type = 'DISBURSEMENT_DELIVERED'",
          [partnerId],
        )
      ).rows.map((r) => r.id);
      expect(events.length).toBe(paid);
      await eventually(
        () => {
          const got = new Set(receiver.received.map((r) => JSON.parse(r.body).id as string));
          return events.every((id) => got.has(id));
        },
        { timeoutMs: 90_000, what: "every event delivered" },
      );
    } finally {
      await client.end();
    }

    const summary = {
      writes: n,
      attempts: attempts.length,
      byStatus: {} as Record<string, number>,
      afterBack: {} as Record<string, number>,
    };
    for (const a of attempts) {
      const k = a.code ? `${a.status} ${a.code}` : a.status === 0 ? `0 ${a.api}` : String(a.status);
      summary.byStatus[k] = (summary.byStatus[k] ?? 0) + 1;
      if (a.at >= backAt) summary.afterBack[a.status] = (summary.afterBack[a.status] ?? 0) + 1;
    }
    console.log(JSON.stringify(summary));
    // No 5xx once the database was back; while it was down, 503 (retry), never a 500.
    const late5xx = attempts.filter((a) => a.at >= backAt && (a.status >= 500 || a.status === 0));
    expect(late5xx).toEqual([]);
    expect(attempts.filter((a) => a.status === 500)).toEqual([]);
    // Every answer was the write's (200), its key still in use by an attempt its client gave up on (409), or 503
    // while the database was away: never a 429 or another refusal. (No answer within the client's 5 s: the process
    // killed, or, before the database was back, a machine loaded beyond it; after, none, as checked above.)
    expect(attempts.filter((a) => ![0, 200, 409, 503].includes(a.status))).toEqual([]);
    expect(attempts.some((a) => a.at < backAt && a.status !== 200)).toBe(true); // the faults were felt
  }, 400_000);
});
