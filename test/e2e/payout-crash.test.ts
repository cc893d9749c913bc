import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { PROCESS_TEST_TIMEOUT_MS, type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { eventually } from "../support/wait.ts";

// The API in this process; payout workers in child processes that die with SIGKILL at a chosen step; the
// payment provider a local server speaking its HTTP API, where a second transfer would show.
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
    // The production subscription below (production events are kept only when subscribed to) is on loopback.
    productionLocalWebhooks: true,
    config: {
      role: "api",
      paymentProvider: { baseUrl: fake.url, secretKey: fake.secretKey, timeoutMs: 5_000 },
      smsProvider: unusedSmsProvider,
    },
  });
  p = await createPartner(t);
  await createWebhook(t.partnerUrl, p.liveKey, {
    url: "http://127.0.0.1:9/hooks",
    events: ["DISBURSEMENT_DELIVERED"],
  });
});
afterAll(async () => {
  if (worker && worker.child.exitCode === null) {
    worker.child.kill("SIGKILL");
    await worker.exited;
  }
  await t?.stop();
  await fake?.close();
});

const count = async (text: string, params: unknown[]) =>
  (await sql(t.app.orm.em.fork(), text, params)).length;

describe("a payout worker killed at each step", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  for (const step of ["payout.before_provider", "payout.after_provider", "payout.before_record"]) {
    it(`${step}: after a restart, exactly one transfer, DELIVERED, one event, booked once`, async () => {
      const u = await createUser(t, { environment: "production" });
      await t.internal.users.setPaymentInstruments({
        userId: u.userId,
        bankRecipientCode: "RCP_crash",
        debitAuthorizationCode: "AUTH_crash",
        debitEmail: "crash@example.com",
      });
      await t.internal.consents.grantConsent({
        userId: u.userId,
        partnerId: p.partnerId,
        scopes: ["standing"],
        ledgerWindowDays: 30,
      });
      worker = await startServiceProcess(workerEnv(step));
      const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
        key: p.liveKey,
        headers: { "idempotency-key": `crash-${step}` },
        body: {
          userId: u.userId,
          principalKobo: "2500000",
          destination: "BANK",
          reference: `crash-${step}`,
          repaymentSchedule: {
            installments: [
              {
                dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10),
                amountKobo: "2600000",
              },
            ],
          },
          scheduleAcceptedAt: new Date().toISOString(),
        },
      });
      expect(res.status).toBe(200);
      await acceptMandate(t, p.liveKey, res.body.id);
      expect(await worker.exited).toBe("SIGKILL");
      const transfers = () => [...fake.transfers.values()].filter((x) => x.reference === res.body.id);
      expect(transfers()).toHaveLength(step === "payout.before_provider" ? 0 : 1);

      worker = await startServiceProcess(workerEnv());
      await eventually(
        async () =>
          (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${res.body.id}`, { key: p.liveKey }))
            .body.status === "DELIVERED",
        {
          timeoutMs: 20_000,
          what: "DELIVERED after restart",
        },
      );
      expect(transfers()).toHaveLength(1);
      // The restarted worker asked about the reference; it never even tried to send a second transfer.
      expect(fake.calls.filter((c) => c === "POST /transfer")).toHaveLength(fake.transfers.size);
      expect(
        await count("select 1 from events where type = 'DISBURSEMENT_DELIVERED' and body like $1", [
          `%${res.body.id}%`,
        ]),
      ).toBe(1);
      expect(await count("select 1 from book_entries where disbursement_id = $1", [res.body.id])).toBe(2);
      worker.child.kill("SIGTERM");
      expect(await worker.exited).toBe(0);
    });
  }
});
