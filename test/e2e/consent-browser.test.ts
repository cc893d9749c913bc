import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { constructWebhookEvent } from "../../src/sdk/webhooks.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser, createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// Debian's Chromium (`.ci/run` installs it). Without it these tests are skipped, and say so.
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser) {
  process.stderr.write(
    `\nconsent page browser tests SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)\n\n`,
  );
}
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

const clock = new ManualClock(Date.now());
let t: TestApp;
let partner: PartnerFixture;
let receiver: TestReceiver;
let secret: string;
let browser: Browser;

beforeAll(async () => {
  if (!haveBrowser) return;
  t = await startTestApp({ clock });
  partner = await createPartner(t, "Kobo Credit & Sons");
  receiver = await startReceiver();
  secret = (
    await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["consent.granted"] })
  ).secret;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await t?.stop();
});

async function newLink(phoneNumber: string, hours = 24) {
  const res = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
    key: partner.sandboxKey,
    body: {
      phoneNumber,
      scopes: ["standing", "ledger", "repayment_history"],
      ledgerWindowDays: 90,
      maxLedgerWindowDays: 180,
      expiresInHours: hours,
    },
  });
  expect(res.status).toBe(200);
  return res.body as { id: string; url: string };
}

/** A small phone's screen. */
async function phonePage(): Promise<Page> {
  const context = await browser.newContext({
    viewport: { width: 320, height: 640 },
    isMobile: true,
    hasTouch: true,
    bypassCSP: true,
  });
  return context.newPage();
}

async function accessibilityViolations(page: Page) {
  await page.addScriptTag({ content: axeSource });
  return page.evaluate(async () => {
    const result = await (
      globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; help: string }[] }> } }
    ).axe.run();
    return result.violations.map((v) => `${v.id}: ${v.help}`);
  });
}

describe.skipIf(!haveBrowser)("the consent page in Chromium", () => {
  it("shows the partner and every scope, passes an accessibility check, fits a phone, and accepting grants consent", async () => {
    const u = await createUser(t);
    const link = await newLink(u.phoneNumber);
    const page = await phonePage();
    const response = await page.goto(link.url);
    expect(response?.status()).toBe(200);
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toContain(
      "Kobo Credit & Sons",
    );
    // biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator; the rendered text is what the person reads.
    const text = await page.locator("main").innerText();
    expect(text).toContain("Your standing tier and score");
    expect(text).toContain("up to the last 180 days");
    expect(text).toContain("No lender is named");
    expect(await accessibilityViolations(page)).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(320);
    // Nothing can be decided before the person proves who they are.
    expect(await page.getByRole("button", { name: /^Allow/ }).count()).toBe(0);

    await page.getByRole("button", { name: "Text me a code" }).click();
    const code = page.getByLabel("Code");
    await code.waitFor();
    expect(await code.getAttribute("autocomplete")).toBe("one-time-code");
    expect(await code.getAttribute("inputmode")).toBe("numeric");
    expect(await accessibilityViolations(page)).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(320);

    // A wrong code: told so, on an accessible page, and nothing is granted.
    await code.fill("111111");
    await page.getByRole("button", { name: /^Allow Kobo Credit/ }).click();
    await page.getByText("That code is not right. 4 tries left.").waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);

    await page.getByLabel("Code").fill("000000");
    await page.getByRole("button", { name: /^Allow Kobo Credit/ }).click();
    await page.getByRole("heading", { name: "Thank you" }).waitFor();

    const after = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${link.id}`, {
      key: partner.sandboxKey,
    });
    expect(after.body.status).toBe("ACCEPTED");
    const got = await eventually(() =>
      receiver.received.find((r) => JSON.parse(r.body).payload.consentId === after.body.consentId),
    );
    const event = await constructWebhookEvent({
      payload: got.body,
      signatureHeader: got.headers["x-service-signature"] as string,
      secret,
      now: () => clock.now().getTime(),
    });
    expect(event).toMatchObject({
      type: "consent.granted",
      payload: { userId: u.userId, source: "CONSENT_LINK" },
    });

    const again = await page.goto(link.url);
    expect(again?.status()).toBe(410);
    expect(await page.locator("h1").textContent()).toContain("already been used");
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.context().close();
  });

  it("declines: the link is DECLINED, no consent is written, and the link cannot be used again", async () => {
    const u = await createUser(t);
    const link = await newLink(u.phoneNumber);
    const page = await phonePage();
    await page.goto(link.url);
    await page.getByRole("button", { name: "Text me a code" }).click();
    await page.getByLabel("Code").fill("000000");
    await page.getByRole("button", { name: "Don't allow" }).click();
    await page.getByRole("heading", { name: "Done" }).waitFor();
    const after = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${link.id}`, {
      key: partner.sandboxKey,
    });
    expect(after.body).toMatchObject({ status: "DECLINED", consentId: "" });
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, { key: partner.sandboxKey }))
        .status,
    ).toBe(404);
    const again = await page.goto(link.url);
    expect(again?.status()).toBe(410);
    await page.context().close();
  });

  it("shows an expired link clearly and accepts nothing through it", async () => {
    const u = await createUser(t);
    const link = await newLink(u.phoneNumber, 1);
    const page = await phonePage();
    await page.goto(link.url);
    await page.getByRole("button", { name: "Text me a code" }).click();
    await page.getByLabel("Code").fill("000000");
    clock.advance(ms.hour + 1);
    // The person opened the page before it expired and presses Allow after: refused.
    await page.getByRole("button", { name: /^Allow/ }).click();
    await page.getByRole("heading", { name: "This link has expired" }).waitFor();
    const reopened = await page.goto(link.url);
    expect(reopened?.status()).toBe(410);
    expect(await accessibilityViolations(page)).toEqual([]);
    const after = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${link.id}`, {
      key: partner.sandboxKey,
    });
    expect(after.body.status).toBe("EXPIRED");
    await page.context().close();
  });
});

describe.skipIf(!haveBrowser)("the repayment mandate page in Chromium", () => {
  async function offer() {
    const u = await createConsentedUser(t, partner.partnerId);
    const day = (n: number) => new Date(clock.now().getTime() + n * ms.day).toISOString().slice(0, 10);
    const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: partner.sandboxKey,
      headers: { "idempotency-key": `browser-${u.userId}` },
      body: {
        userId: u.userId,
        principalKobo: "5000000",
        destination: "BANK",
        reference: `browser-${u.userId}`,
        repaymentSchedule: {
          installments: [
            { dueDate: day(30), amountKobo: "2750000" },
            { dueDate: day(60), amountKobo: "2750000" },
          ],
        },
      },
    });
    expect(res.status).toBe(200);
    return res.body as { id: string; acceptanceUrl: string };
  }

  it("shows the loan, every repayment and the total, passes an accessibility check, fits a phone, and accepting starts the payout", async () => {
    const d = await offer();
    const page = await phonePage();
    expect((await page.goto(d.acceptanceUrl))?.status()).toBe(200);
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe(
      "Kobo Credit & Sons offers you a loan of ₦50,000.00",
    );
    // biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator; the rendered text is what the person reads.
    const text = await page.locator("main").innerText();
    expect(text).toContain("₦27,500.00");
    expect(text).toMatch(/Total to repay\s+₦55,000\.00/);
    expect(text).toContain("₦5,000.00 in all");
    expect(await page.getByRole("row").count()).toBe(4); // header, two repayments, total
    expect(await accessibilityViolations(page)).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(320);
    expect(await page.getByRole("button", { name: /^Accept/ }).count()).toBe(0);

    await page.getByRole("button", { name: "Text me a code" }).click();
    const code = page.getByLabel("Code");
    await code.waitFor();
    expect(await code.getAttribute("autocomplete")).toBe("one-time-code");
    expect(await code.getAttribute("inputmode")).toBe("numeric");
    expect(await accessibilityViolations(page)).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(320);

    await code.fill("123456");
    await page.getByRole("button", { name: /^Accept the loan/ }).click();
    await page.getByText("That code is not right. 4 tries left.").waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${d.id}`, { key: partner.sandboxKey })).body
        .status,
    ).toBe("AWAITING_ACCEPTANCE");

    await page.getByLabel("Code").fill("000000");
    await page.getByRole("button", { name: /^Accept the loan/ }).click();
    await page.getByRole("heading", { name: "Thank you" }).waitFor();
    const after = await eventually(async () => {
      const body = (
        await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${d.id}`, { key: partner.sandboxKey })
      ).body;
      return body.status === "DELIVERED" ? body : undefined;
    });
    expect(after.acceptance.authentication.method).toBe("OTP_SMS");

    const again = await page.goto(d.acceptanceUrl);
    expect(again?.status()).toBe(410);
    expect(await page.locator("h1").textContent()).toBe("You have already accepted this offer");
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.context().close();
  });

  it("declines: CANCELLED, nothing paid, and the page says so", async () => {
    const d = await offer();
    const page = await phonePage();
    await page.goto(d.acceptanceUrl);
    await page.getByRole("button", { name: "Text me a code" }).click();
    await page.getByLabel("Code").fill("000000");
    await page.getByRole("button", { name: "Decline" }).click();
    await page.getByRole("heading", { name: "Done" }).waitFor();
    const after = await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${d.id}`, {
      key: partner.sandboxKey,
    });
    expect(after.body).toMatchObject({ status: "CANCELLED", failureReason: "mandate_declined" });
    expect((await page.goto(d.acceptanceUrl))?.status()).toBe(410);
    expect(await page.locator("h1").textContent()).toBe("You declined this offer");
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.context().close();
  });
});
