import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYSTACK_WEBHOOK_PATH } from "../../src/disbursements/provider-webhooks.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { PROCESS_TEST_TIMEOUT_MS, type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { eventually } from "../support/wait.ts";

// A payout reversed after a collection: the API in this process, refund workers in child processes that die
// with SIGKILL at a chosen step; the payment provider a local server speaking its HTTP API, where a second
// refund would show.
let t: TestApp;
let fake: FakePaystack;
let p: PartnerFixture;
let worker: ServiceProcess | undefined;

const workerEnv = (failpoint?: string) => ({
  ROLE: "worker",
  DATABASE_URL: t.databaseUrl,
  MASTER_KEY: t.masterKey.toString("hex"),
  INTERNAL_TOKEN: t.internalToken,
  PAYOUT_RESUME_AFTER_MS: "0",
  FAILPOINTS: failpoint ?? "",
  PAYMENT_PROVIDER_URL: fake.url,
  PAYMENT_PROVIDER_SECRET_KEY: fake.secretKey,
});

beforeAll(async () => {
  fake = await startFakePaystack();
  t = await startTestApp({
    config: {
      role: "api",
      paymentProvider: { baseUrl: fake.url, secretKey: fake.secretKey, timeoutMs: 5_000 },
      smsProvider: unusedSmsProvider,
    },
  });
  p = await createPartner(t);
});
afterAll(async () => {
  if (worker && worker.child.exitCode === null) {
    worker.child.kill("SIGKILL");
    await worker.exited;
  }
  await t?.stop();
  await fake?.close();
});

const em = () => t.app.orm.em.fork();
const count = async (text: string, params: unknown[]) => (await sql(em(), text, params)).length;
const get = async (path: string) => (await rest(t.partnerUrl, "GET", path, { key: p.liveKey })).body;
/**
 * A live disbursement DELIVERED by the running worker, its first installment collected through the provider.
 * The worker started before it, so its start-up sweep is over by the time a refund is owed: with the test's
 * lease of 0 (`PAYOUT_RESUME_AFTER_MS`), that sweep would otherwise take the refund's attempt again while the
 * job's is still at the provider (in production the lease outlasts a provider call).
 */
async function deliveredAndCollected(reference: string) {
  const u = await createUser(t, { environment: "production" });
  await t.internal.users.setPaymentInstruments({
    userId: u.userId,
    bankRecipientCode: "RCP_refundcrash",
    debitAuthorizationCode: "AUTH_refundcrash",
    debitEmail: "refund-crash@example.com",
  });
  await t.internal.consents.grantConsent({
    userId: u.userId,
    partnerId: p.partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  const due = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
  const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key: p.liveKey,
    headers: { "idempotency-key": reference },
    body: {
      userId: u.userId,
      principalKobo: "2500000",
      destination: "BANK",
      reference,
      repaymentSchedule: {
        installments: [
          { dueDate: due(30), amountKobo: "1300000" },
          { dueDate: due(60), amountKobo: "1300000" },
        ],
      },
    },
  });
  expect(res.status).toBe(200);
  const id = res.body.id as string;
  await acceptMandate(t, p.liveKey, id);
  await eventually(async () => (await get(`/partner/v1/disbursements/${id}`)).status === "DELIVERED", {
    timeoutMs: 20_000,
    what: "DELIVERED",
  });
  const repayments = `/partner/v1/disbursements/${id}/repayments`;
  const first = (await get(repayments)).repayments[0].id as string;
  // Its due date, come early: the debit runs here, through the provider (or in the worker's minute sweep).
  // A second back: the database's microseconds are finer than the service clock's milliseconds, so `now()`
  // itself could still be a fraction ahead of the clock that asks whether it is due.
  await sql(em(), "update installments set next_attempt_at = now() - interval '1 second' where id = $1", [
    first,
  ]);
  await t.app.services.repayments.collect(em(), first);
  await eventually(async () => (await get(repayments)).repayments[0].status === "COLLECTED", {
    what: "COLLECTED",
  });
  return { id, userId: u.userId, first, charge: `${first}:1` };
}

describe("a refund worker killed at each step", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  for (const step of ["refund.before_provider", "refund.after_provider", "refund.before_record"]) {
    it(`${step}: after a restart, exactly one refund at the provider, booked once, on the ledger once; the books balance`, async () => {
      worker = await startServiceProcess(workerEnv(step));
      const d = await deliveredAndCollected(`refund-crash-${step}`);
      // The provider reverses the payout and says so: the refund is owed, and its job queued.
      const transfer = fake.transfers.get(d.id);
      if (!transfer) throw new Error("no transfer");
      transfer.status = "reversed";
      expect(
        await fake.sendWebhook(`${t.partnerUrl}${PAYSTACK_WEBHOOK_PATH}`, "transfer.reversed", {
          reference: d.id,
        }),
      ).toBe(200);
      expect(await worker.exited).toBe("SIGKILL");
      const refunds = () => [...fake.refunds.values()].filter((r) => r.transactionReference === d.charge);
      expect(refunds()).toHaveLength(step === "refund.before_provider" ? 0 : 1);
      expect(
        await count("select 1 from book_entries where installment_id = $1 and kind = 'REPAYMENT_REFUND'", [
          d.first,
        ]),
      ).toBe(0);

      worker = await startServiceProcess(workerEnv());
      const repayments = await eventually(
        async () => {
          const list = (await get(`/partner/v1/disbursements/${d.id}/repayments`)).repayments;
          return list[0].refund?.status === "REFUNDED" ? list : undefined;
        },
        { timeoutMs: 20_000, what: "REFUNDED after restart" },
      );
      expect(repayments.map((r: { status: string }) => r.status)).toEqual(["COLLECTED", "CANCELLED"]);
      expect(refunds()).toHaveLength(1);
      expect(refunds()[0]?.amount).toBe(1_300_000);
      // The restarted worker asked about the charge first; no second refund was ever asked for.
      expect(fake.calls.filter((c) => c === "POST /refund")).toHaveLength(fake.refunds.size);
      expect(
        await count("select 1 from ledger_entries where id = $1 and direction = 'IN'", [`refund:${d.first}`]),
      ).toBe(1);
      const entries = await sql<{ kind: string; amount_kobo: string }>(
        em(),
        "select kind, amount_kobo::text from book_entries where disbursement_id = $1 order by kind",
        [d.id],
      );
      expect(entries).toEqual([
        { kind: "FEE", amount_kobo: "-37500" },
        { kind: "FEE_REVERSED", amount_kobo: "37500" },
        { kind: "PRINCIPAL_OUT", amount_kobo: "-2500000" },
        { kind: "PRINCIPAL_REVERSED", amount_kobo: "2500000" },
        { kind: "REPAYMENT_IN", amount_kobo: "1300000" },
        { kind: "REPAYMENT_REFUND", amount_kobo: "-1300000" },
      ]);
      expect(entries.reduce((s, e) => s + BigInt(e.amount_kobo), 0n)).toBe(0n);
      worker.child.kill("SIGTERM");
      expect(await worker.exited).toBe(0);
    });
  }
});
