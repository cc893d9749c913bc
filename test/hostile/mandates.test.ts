import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { openPage, requestCode, submit } from "../support/consent-page.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { type FakeSms, startFakeSms } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";

// A partner acting in bad faith holds the mandate page's URL (it made the disbursement) and the user's
// consent. It must still not be able to accept a repayment schedule for the person, nor have anything paid
// out or debited that the person did not accept.
let t: TestApp;
let p: PartnerFixture;
let sms: FakeSms;
let fake: FakePaystack;
const logs: string[] = [];
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  sms = await startFakeSms();
  fake = await startFakePaystack();
  t = await startTestApp({
    clock,
    config: {
      paymentProvider: { baseUrl: fake.url, secretKey: fake.secretKey, timeoutMs: 5_000 },
      smsProvider: { baseUrl: sms.url, apiKey: sms.apiKey, senderId: "Platform", timeoutMs: 5_000 },
      rateLimits: {
        read: { capacity: 10_000, refillPerSecond: 10_000 },
        write: { capacity: 10_000, refillPerSecond: 10_000 },
      },
    },
    onLog: (line) => logs.push(line),
  });
  p = await createPartner(t);
});
afterAll(async () => {
  await t?.stop();
  await sms?.close();
  await fake?.close();
});

const day = (n: number) =>
  new Date(clock.now().getTime() + 3_600_000 + n * ms.day).toISOString().slice(0, 10);
let n = 0;
async function offer(
  o: { environment?: "sandbox" | "production"; hours?: number } = {},
): Promise<{ id: string; url: string; userId: string; phoneNumber: string; body: any }> {
  const environment = o.environment ?? "sandbox";
  const u = await createConsentedUser(t, p.partnerId, { environment });
  const key = environment === "sandbox" ? p.sandboxKey : p.liveKey;
  if (environment === "production")
    await t.internal.users.setPaymentInstruments({
      userId: u.userId,
      bankRecipientCode: "RCP_x",
      walletRecipientCode: "RCP_w",
      debitAuthorizationCode: "AUTH_x",
      debitEmail: "u@example.com",
    });
  const reference = `mandate-${++n}`;
  const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key,
    headers: { "idempotency-key": reference },
    body: {
      userId: u.userId,
      principalKobo: "1000000",
      destination: "WALLET",
      reference,
      repaymentSchedule: {
        installments: [
          { dueDate: day(30), amountKobo: "600000" },
          { dueDate: day(60), amountKobo: "600000" },
        ],
      },
      // Deprecated and ignored: the partner's word is not the person's acceptance.
      scheduleAcceptedAt: "1970-01-01T00:00:00Z",
      ...(o.hours === undefined ? {} : { acceptanceExpiresInHours: o.hours }),
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return {
    id: res.body.id,
    url: res.body.acceptanceUrl,
    userId: u.userId,
    phoneNumber: u.phoneNumber,
    body: res.body,
  };
}
const get = async (id: string, key = p.sandboxKey) =>
  (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}`, { key })).body;
const count = async (text: string, params: unknown[]) =>
  (await sql(t.app.orm.em.fork(), text, params)).length;
/** Everything that would pay out or debit, run now, as the workers would. */
const runWorkers = async () => {
  const em = () => t.app.orm.em.fork();
  await t.app.services.disbursements.resumeStuck(em(), 0);
  await t.app.services.repayments.collectDue(em());
};

describe("a disbursement the person has not accepted", () => {
  it("is AWAITING_ACCEPTANCE, whatever scheduleAcceptedAt says, and nothing is paid out, charged or debited", async () => {
    const d = await offer();
    expect(d.body).toMatchObject({ status: "AWAITING_ACCEPTANCE", scheduleAcceptedAt: "" });
    expect(d.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mandate\/[0-9A-Za-z]{32}$/);
    const em = () => t.app.orm.em.fork();
    expect(await t.app.services.disbursements.payout(em(), d.id)).not.toBe("PROCESSING");
    clock.advance(90 * ms.day);
    try {
      await runWorkers();
      const [first] = (
        await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${d.id}/repayments`, { key: p.sandboxKey })
      ).body.repayments;
      expect(await t.app.services.repayments.collect(em(), first.id)).toBe("NOT_DUE");
    } finally {
      clock.advance(-90 * ms.day);
    }
    expect(await count("select 1 from sandbox_transfers where reference = $1", [d.id])).toBe(0);
    expect(
      await count("select 1 from sandbox_debits where reference like $1", [`rpy_${d.id.slice(4)}%`]),
    ).toBe(0);
    expect(await count("select 1 from book_entries where disbursement_id = $1", [d.id])).toBe(0);
    expect(await count("select 1 from events where body like $1", [`%${d.id}%`])).toBe(0);
  });

  it("is not accepted by the partner holding the URL: the anti-forgery token without the person's code writes nothing", async () => {
    const d = await offer({ environment: "production" });
    const page = await openPage(d.url);
    expect(page.status).toBe(200);
    expect(page.html).toContain("Text me a code");
    expect(page.html).not.toContain('value="accept"');
    // Without any code sent, an answer is refused and nothing is counted against the person.
    expect((await submit(d.url, page, "accept", { code: "123456" })).status).toBe(422);
    expect((await requestCode(d.url, page)).status).toBe(200);
    const sent = await waitForCode(d.phoneNumber);
    const wrong = String((Number(sent) + 1) % 1_000_000).padStart(6, "0");
    const answers = [];
    for (const code of ["", "123", "abcdef", "0000000", wrong]) {
      answers.push((await submit(d.url, page, "accept", { code })).status);
    }
    // Four wrong codes are told; the fifth locks the mandate for good.
    expect(answers).toEqual([422, 422, 422, 422, 410]);
    expect((await submit(d.url, page, "accept", { code: sent })).status).toBe(410);
    expect((await get(d.id, p.liveKey)).status).toBe("CANCELLED");
    expect((await get(d.id, p.liveKey)).failureReason).toBe("mandate_locked");
    expect(
      await count("select 1 from disbursements where id = $1 and accepted_total_kobo is not null", [d.id]),
    ).toBe(0);
  });

  it("is accepted by the person with the code texted to the platform's number: OTP_SMS, the schedule as shown, and the code never logged", async () => {
    const d = await offer({ environment: "production" });
    const phone = d.phoneNumber;
    const page = await openPage(d.url);
    expect((await requestCode(d.url, page)).status).toBe(200);
    const code = await waitForCode(phone);
    // A code of another page does not work here, nor this code on another page.
    const other = await offer({ environment: "production" });
    const otherPage = await openPage(other.url);
    expect((await submit(other.url, otherPage, "accept", { code })).status).toBe(422);
    const res = await submit(d.url, page, "accept", { code });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("You accepted the loan");
    const after = await get(d.id, p.liveKey);
    expect(after).toMatchObject({
      status: expect.stringMatching(/^(PENDING|PROCESSING|DELIVERED)$/),
      acceptance: {
        authentication: { method: "OTP_SMS" },
        repaymentSchedule: d.body.repaymentSchedule,
        totalRepayableKobo: "1200000",
        principalKobo: "1000000",
      },
    });
    expect(after.acceptanceUrl ?? "").toBe("");
    expect(logs.join("\n")).not.toContain(code);
    // Used once: the page is gone, and the sandbox helper cannot reopen it.
    expect((await openPage(d.url)).status).toBe(410);
    expect((await submit(d.url, page, "decline", { code })).status).toBe(410);
    const sealed = await sql<{ evidence: Buffer | null; terms: Buffer | null }>(
      t.app.orm.em.fork(),
      "select acceptance_evidence_enc as evidence, acceptance_terms_hash as terms from disbursements where id = $1",
      [d.id],
    );
    expect(sealed[0]?.evidence?.length).toBeGreaterThan(16);
    expect(sealed[0]?.terms?.length).toBe(32);
    expect(JSON.stringify(after)).not.toMatch(/127\.0\.0\.1|userAgent|ip"/);
  });

  it("lapses when unanswered: CANCELLED with mandate_expired, the page gone, no payout, no fee", async () => {
    const d = await offer({ hours: 1 });
    clock.advance(61 * ms.minute);
    try {
      expect(await get(d.id)).toMatchObject({ status: "CANCELLED", failureReason: "mandate_expired" });
      expect((await openPage(d.url)).status).toBe(410);
      const late = await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/disbursements/${d.id}/accept`, {
        key: p.sandboxKey,
      });
      expect(late.status).toBe(410);
      expect(late.body.code).toBe("mandate_gone");
      expect(await t.app.services.mandates.expireDue(t.app.orm.em.fork())).toBeGreaterThanOrEqual(1);
      expect(await count("select 1 from disbursements where id = $1 and status = 'CANCELLED'", [d.id])).toBe(
        1,
      );
    } finally {
      clock.advance(-61 * ms.minute);
    }
    expect(await count("select 1 from book_entries where disbursement_id = $1", [d.id])).toBe(0);
  });

  it("is declined by the person: CANCELLED with mandate_declined, every installment cancelled", async () => {
    const d = await offer();
    const res = await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/disbursements/${d.id}/decline`, {
      key: p.sandboxKey,
    });
    expect(res.body).toMatchObject({ status: "CANCELLED", failureReason: "mandate_declined" });
    const list = await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${d.id}/repayments`, {
      key: p.sandboxKey,
    });
    expect(list.body.repayments.map((r: { status: string }) => r.status)).toEqual(["CANCELLED", "CANCELLED"]);
    await runWorkers();
    expect(await count("select 1 from sandbox_transfers where reference = $1", [d.id])).toBe(0);
  });

  it("lapses when its first installment's day begins, whatever time it asked for: CANCELLED, nothing paid", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      headers: { "idempotency-key": `lapse-${u.userId}` },
      body: {
        userId: u.userId,
        principalKobo: "1000",
        destination: "WALLET",
        reference: `lapse-${u.userId}`,
        repaymentSchedule: { installments: [{ dueDate: day(1), amountKobo: "1000" }] },
        acceptanceExpiresInHours: 72,
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.acceptanceExpiresAt).toBe(new Date(`${day(1)}T00:00:00+01:00`).toISOString());
    clock.advance(ms.day);
    try {
      const late = await rest(
        t.partnerUrl,
        "POST",
        `/partner/v1/sandbox/disbursements/${res.body.id}/accept`,
        {
          key: p.sandboxKey,
        },
      );
      expect(late.status).toBe(410);
      expect(await get(res.body.id)).toMatchObject({ status: "CANCELLED", failureReason: "mandate_expired" });
      expect((await openPage(res.body.acceptanceUrl)).status).toBe(410);
      await runWorkers();
    } finally {
      clock.advance(-ms.day);
    }
    expect(await count("select 1 from sandbox_transfers where reference = $1", [res.body.id])).toBe(0);
  });

  it("refuses an answer window outside 1 to 168 hours", async () => {
    for (const hours of [-1, 169, 100_000]) {
      const u = await createConsentedUser(t, p.partnerId);
      const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
        key: p.sandboxKey,
        headers: { "idempotency-key": `hours-${hours}` },
        body: {
          userId: u.userId,
          principalKobo: "1000",
          destination: "WALLET",
          reference: `hours-${hours}`,
          repaymentSchedule: { installments: [{ dueDate: day(10), amountKobo: "1000" }] },
          acceptanceExpiresInHours: hours,
        },
      });
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.details.fields)).toEqual(["acceptanceExpiresInHours"]);
    }
  });

  it("is accepted once under 20 concurrent answers: one acceptance, one payout", async () => {
    const d = await offer();
    const answers = await Promise.all(
      [...Array(20)].map((_, i) =>
        rest(
          t.partnerUrl,
          "POST",
          `/partner/v1/sandbox/disbursements/${d.id}/${i % 3 ? "accept" : "decline"}`,
          {
            key: p.sandboxKey,
            headers: { "idempotency-key": `race-${i}` },
          },
        ),
      ),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    for (const a of answers.filter((x) => x.status !== 200)) expect(a.body.code).toBe("mandate_gone");
    await runWorkers();
    expect(await count("select 1 from sandbox_transfers where reference = $1", [d.id])).toBeLessThanOrEqual(
      1,
    );
  });
});

describe("debits hold to the accepted mandate", () => {
  it("never debits an installment raised after acceptance, nor past the accepted total", async () => {
    const d = await offer();
    await acceptMandate(t, p.sandboxKey, d.id);
    await runWorkersUntil(async () => (await get(d.id)).status === "DELIVERED");
    const [first, second] = (
      await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${d.id}/repayments`, { key: p.sandboxKey })
    ).body.repayments;
    // What a bug, or anyone with the database, might do: raise an installment above what was accepted.
    await sql(t.app.orm.em.fork(), "update installments set amount_kobo = 900000000000 where id = $1", [
      first.id,
    ]);
    clock.advance(31 * ms.day);
    try {
      expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), first.id)).toBe("NOT_DUE");
      // The second, as accepted, is collected exactly as accepted.
      clock.advance(30 * ms.day);
      expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), second.id)).toBe("COLLECTED");
    } finally {
      clock.advance(-61 * ms.day);
    }
    const debits = await sql<{ reference: string; amount_kobo: string }>(
      t.app.orm.em.fork(),
      "select reference, amount_kobo::text from sandbox_debits where reference like $1 order by reference",
      [`rpy_${d.id.slice(4)}%`],
    );
    expect(debits).toEqual([{ reference: `${second.id}:1`, amount_kobo: "600000" }]);
  });
});

describe("prompt sessions for mandates", () => {
  const openPrompt = async (url: string) => {
    const res = await fetch(url, { redirect: "manual" });
    return {
      status: res.status,
      cookie: res.headers.get("set-cookie")?.split(";")[0],
      to: res.headers.get("location"),
    };
  };

  it("open the person's own mandate once, signed in, and are bound to that person", async () => {
    const mine = await offer({ environment: "production" });
    const theirs = await offer({ environment: "production" });
    // A session for one user is not minted for another user's mandate.
    await expect(
      t.internal.consents.createPromptSession({ userId: mine.userId, disbursementId: theirs.id }),
    ).rejects.toThrow(/not_found|No disbursement/);
    const { url } = await t.internal.consents.createPromptSession({
      userId: mine.userId,
      disbursementId: mine.id,
    });
    const opened = await openPrompt(url);
    expect(opened.status).toBe(303);
    expect(opened.to).toBe(new URL(mine.url).pathname);
    expect((await openPrompt(url)).status).toBe(404);
    // On another person's mandate page the session counts for nothing: the code step is back.
    const theirPage = await fetch(theirs.url, {
      headers: { accept: "text/html", cookie: opened.cookie ?? "" },
    });
    expect(await theirPage.text()).toContain("Text me a code");
    const page = await fetch(mine.url, { headers: { accept: "text/html", cookie: opened.cookie ?? "" } });
    const html = await page.text();
    expect(html).toContain("no code is needed");
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";
    const csrfCookie = page.headers.get("set-cookie")?.split(";")[0] ?? "";
    const answer = await fetch(mine.url, {
      method: "POST",
      redirect: "manual",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: new URL(mine.url).origin,
        cookie: `${opened.cookie}; ${csrfCookie}`,
      },
      body: new URLSearchParams({ csrf, step: "decide", decision: "accept" }).toString(),
    });
    expect(answer.status).toBe(200);
    expect((await get(mine.id, p.liveKey)).acceptance.authentication.method).toBe("PLATFORM_SESSION");
  });

  it("accept once when two of them answer the same mandate at the same time: the other is told it is already decided (410)", async () => {
    const d = await offer({ environment: "production" });
    // Two sessions for the same person and mandate (two devices, or the dashboard asked twice), each page
    // opened while the mandate still waits, then both answered at once.
    const signedIn = async () => {
      const { url } = await t.internal.consents.createPromptSession({
        userId: d.userId,
        disbursementId: d.id,
      });
      const opened = await openPrompt(url);
      const page = await fetch(d.url, { headers: { accept: "text/html", cookie: opened.cookie ?? "" } });
      const html = await page.text();
      expect(html).toContain("no code is needed");
      return {
        csrf: /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? "",
        cookie: `${opened.cookie}; ${page.headers.get("set-cookie")?.split(";")[0] ?? ""}`,
      };
    };
    const browsers = [await signedIn(), await signedIn()];
    const answers = await Promise.all(
      browsers.map((b) =>
        fetch(d.url, {
          method: "POST",
          redirect: "manual",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            origin: new URL(d.url).origin,
            accept: "application/json",
            cookie: b.cookie,
          },
          body: new URLSearchParams({ csrf: b.csrf, step: "decide", decision: "accept" }).toString(),
        }).then(async (r) => ({ status: r.status, body: await r.text() })),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 410]);
    expect(JSON.parse(answers.find((a) => a.status === 410)?.body ?? "{}").code).toBe("mandate_gone");
    expect((await get(d.id, p.liveKey)).acceptance.authentication.method).toBe("PLATFORM_SESSION");
    // One acceptance queued one payout.
    expect(
      await count(
        "select 1 from pgboss.job where name = 'disbursements.payout' and data->>'disbursementId' = $1",
        [d.id],
      ),
    ).toBe(1);
  });

  it("expire", async () => {
    const d = await offer({ environment: "production" });
    const { url } = await t.internal.consents.createPromptSession({
      userId: d.userId,
      disbursementId: d.id,
      expiresInSeconds: 30,
    });
    clock.advance(31_000);
    try {
      expect((await openPrompt(url)).status).toBe(404);
    } finally {
      clock.advance(-31_000);
    }
  });
});

async function waitForCode(phone: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const code = sms.lastCode(phone);
    if (code) return code;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("no code was texted");
}

async function runWorkersUntil(done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await done()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("not done");
}
