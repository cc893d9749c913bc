import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { checkPage, goTo, haveBrowser, launchBrowser, signOut, tabCycle } from "../support/browser.ts";
import { rest } from "../support/clients.ts";
import { member, portalAdmin, totpCode } from "../support/portal.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// A person in the portal, in Chromium, as the operator's invitation starts it: set a password, enrol an
// authenticator app, keep the recovery codes, subscribe a webhook, send it a test and see it delivered; sign
// out, and sign in again with the keyboard alone. Every page passes axe and fits a 375 px screen.
let t: TestApp;
let partner: PartnerFixture;
let receiver: TestReceiver;
let browser: Browser;
beforeAll(async () => {
  if (!haveBrowser) return;
  t = await startTestApp();
  partner = await createPartner(t, "Kobo Credit & Sons");
  receiver = await startReceiver();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await t?.stop();
});

/** The next TOTP code that has not been used yet: codes are single use, so wait for a fresh 30 s step. */
async function freshCode(secret: string, used: Set<string>): Promise<string> {
  for (;;) {
    const code = totpCode(secret, systemClock);
    if (!used.has(code)) {
      used.add(code);
      return code;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe.skipIf(!haveBrowser)("the portal in Chromium", () => {
  it("takes an invited person from the invitation to a delivered test event, and back in by keyboard", async () => {
    const own = await createPartner(t, "Kobo Credit & Sons");
    const email = `ada-${Date.now()}@example.com`;
    const password = "a long and private passphrase";
    const { inviteUrl } = await portalAdmin(t).inviteMember({
      partnerId: own.partnerId,
      email,
      role: "admin",
    });
    const url = new URL(inviteUrl);
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("pageerror", (e) => problems.push(e.message));
    page.on("console", (m) => {
      if (m.type() === "error" && /Content Security Policy/.test(m.text())) problems.push(m.text());
    });

    // The invitation, as the link opens it.
    await page.goto(`${t.partnerUrl}${url.pathname}${url.hash}`);
    await page.getByRole("heading", { name: "Join Kobo Credit & Sons on the partner portal" }).waitFor();
    expect(await page.locator("main").textContent()).toContain(email);
    await checkPage(page, 375);
    await page.getByLabel("Password (12 to 128 characters)").fill(password);
    await page.getByLabel("The same password again").fill(password);
    await page.getByRole("button", { name: "Continue" }).click();

    // The authenticator app's key: shown as a QR code and as text.
    await page.getByRole("heading", { name: "2. Add the portal to your authenticator app" }).waitFor();
    expect(await page.getByRole("img", { name: "QR code of the authenticator key" }).isVisible()).toBe(true);
    const secret = ((await page.locator("code.secret").textContent()) ?? "").trim();
    expect(secret).toMatch(/^[A-Z2-7]{16,}$/);
    await checkPage(page, 375);
    const used = new Set<string>();
    await page.getByLabel("The 6-digit code the app shows now").fill(await freshCode(secret, used));
    await page.getByRole("button", { name: "Finish" }).click();

    // Recovery codes, shown once; then the portal itself.
    await page.getByRole("heading", { name: "You are signed in" }).waitFor();
    const recovery = ((await page.locator(".shown-once pre").textContent()) ?? "")
      .split("\n")
      .filter(Boolean);
    expect(recovery).toHaveLength(10);
    await checkPage(page, 375);
    await page.getByRole("button", { name: "Continue to the portal" }).click();
    await page.getByRole("heading", { level: 1, name: "Overview (sandbox)" }).waitFor();
    await page.getByText("Latest events").waitFor();
    expect(new URL(page.url()).hash).toBe("");
    expect(await page.getByRole("note").textContent()).toContain("Sandbox");
    await checkPage(page, 375);

    // The partner's sandbox key, rolled here: the new one is shown once and works at once; the old one keeps
    // working through its overlap (24 hours by default).
    await goTo(page, "API keys");
    await page.getByRole("heading", { level: 1, name: "API keys (sandbox)" }).waitFor();
    const shownKey = async () => ((await page.locator(".shown-once code.secret").textContent()) ?? "").trim();
    const works = async (key: string) =>
      (await fetch(`${t.partnerUrl}/partner/v1/keys`, { headers: { authorization: `Bearer ${key}` } }))
        .status;
    await page.getByRole("button", { name: "Roll" }).click();
    await page.getByText("Your new sandbox API key.").waitFor();
    const rolled = await shownKey();
    expect(rolled).toMatch(/^sk_sandbox_[0-9A-Za-z]{32}$/);
    expect(await works(rolled)).toBe(200);
    expect(await works(own.sandboxKey)).toBe(200);
    await page.getByText("EXPIRING").waitFor();
    // Revoked here, the rolled key stops at once; a new one is issued, shown once, and works.
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Revoke" }).click();
    await page.getByRole("button", { name: "Issue a sandbox key" }).waitFor();
    expect(await works(rolled)).toBe(401);
    await page.getByRole("button", { name: "Issue a sandbox key" }).click();
    await page.waitForFunction(
      (old) => document.querySelector(".shown-once code.secret")?.textContent?.trim() !== old,
      rolled,
    );
    const issued = await shownKey();
    expect(issued).toMatch(/^sk_sandbox_[0-9A-Za-z]{32}$/);
    expect(await works(issued)).toBe(200);
    await checkPage(page, 375);
    await goTo(page, "Webhooks");
    await page.getByRole("heading", { level: 1, name: "Webhooks" }).waitFor();

    // A subscription to a local receiver; its secret shown once.
    await page.getByLabel("Endpoint URL").fill(receiver.url);
    await page.getByRole("button", { name: "Create subscription" }).click();
    await page.getByText("It is shown only now").waitFor();
    expect(await page.locator(".shown-once code.secret").textContent()).toMatch(/^whsec_/);
    await page.getByRole("button", { name: "Send test" }).click();
    await page.getByText("Test event queued").waitFor();
    const [delivery] = await receiver.waitFor(1);
    expect(JSON.parse(delivery?.body ?? "{}").test).toBe(true);

    // The subscription's page: its last 24 hours charted, the test delivered, its attempt with the headers sent.
    await page.getByRole("link", { name: receiver.url }).click();
    const heading = page.getByRole("heading", { name: `Deliveries to ${receiver.url}` });
    await heading.waitFor();
    const delivered = page
      .getByRole("row")
      .filter({ has: page.locator(".badge.good", { hasText: "DELIVERED" }) });
    // The page lists what the database holds when it loads, and fills the list after its heading: wait until
    // the worker has recorded the outcome, then load the page once and wait for its rows (a count read as
    // soon as the heading shows can come before the list, however many times the page is loaded).
    const recorded = (status: "DELIVERED" | "FAILED", n: number) =>
      eventually(
        async () => {
          const [row] = await sql<{ n: number }>(
            t.app.orm.em.fork(),
            `select count(*)::int as n from webhook_deliveries d join webhooks w on w.id = d.webhook_id
              where w.url = $1 and d.status = $2`,
            [receiver.url, status],
          );
          return (row?.n ?? 0) >= n;
        },
        { what: `${n} ${status} deliveries recorded` },
      );
    await recorded("DELIVERED", 1);
    await page.reload();
    await heading.waitFor();
    await delivered.first().waitFor();
    expect(await delivered.count()).toBe(1);
    expect(await page.getByRole("cell", { name: /^HTTP 200 in \d+ ms$/ }).count()).toBe(1);
    // The charts are drawn once the subscription's stats arrive, a request of their own after the list's; their
    // legends show the latest hour's figures, not dashes.
    await page.locator(".chart canvas").nth(1).waitFor();
    expect(await page.locator(".chart canvas").count()).toBe(2);
    expect(await page.locator(".chart .u-legend").first().textContent()).toMatch(
      /Delivered\s*1\s*Failed\s*0/,
    );
    await checkPage(page, 375);
    // The delivery's own page: its attempt, and the headers sent.
    await delivered.first().locator("a.id-link").nth(1).click();
    await page.getByRole("heading", { level: 1, name: "Delivery" }).waitFor();
    await page.getByText("Headers sent").click();
    expect(await page.locator(".timeline pre").last().textContent()).toMatch(
      /signature: t=\d+,v1=[0-9a-f]{64}/i,
    );
    await checkPage(page, 375);

    // The endpoint fails: the next test shows the failed attempt; once it is fixed, Replay delivers it.
    receiver.answer = () => ({ status: 500, body: "down for maintenance" });
    await page.goto(`${t.partnerUrl}/portal/webhooks`);
    await page.getByRole("button", { name: "Send test" }).click();
    await page.getByText("Test event queued").waitFor();
    await recorded("FAILED", 1);
    await page.getByRole("link", { name: receiver.url }).click();
    await heading.waitFor();
    await page.getByLabel("FAILED", { exact: true }).check();
    const failed = page.getByRole("row").filter({ has: page.locator(".badge.bad", { hasText: "FAILED" }) });
    await failed.first().waitFor();
    expect(await failed.count()).toBe(1);
    expect(await page.getByRole("cell", { name: /^HTTP 500 in \d+ ms$/ }).count()).toBe(1);
    receiver.answer = () => ({ status: 200 });
    await failed.first().locator("a.id-link").nth(1).click();
    await page.getByRole("heading", { level: 1, name: "Delivery" }).waitFor();
    await page.getByText("down for maintenance").waitFor();
    await page.getByRole("button", { name: "Replay", exact: true }).click();
    await page.getByText("Replayed as").waitFor();
    await recorded("DELIVERED", 2);
    await page.getByRole("link", { name: "Subscription" }).click();
    await heading.waitFor();
    await delivered.nth(1).waitFor();
    expect(await delivered.count()).toBe(2);
    await checkPage(page, 375);

    // Every portal write went through the same partner API, in the caller's own name: the operator's audit
    // shows the create and the test send.
    const audit = await portalAdmin(t).listAuditEvents({ partnerId: own.partnerId, limit: 100 });
    const calls = audit.events.filter((e) => e.action === "api_call").map((e) => e.detail);
    expect(calls).toContain("partner.v1.WebhookService/CreateWebhook");
    expect(calls).toContain("partner.v1.WebhookService/SendTestEvent");

    // Sign out, then back in with the keyboard alone (a recovery code as the second factor).
    await signOut(page);
    await page.getByRole("heading", { name: "Sign in to the partner portal" }).waitFor();
    await checkPage(page, 375);
    // Tab to the email field (the first field), then Tab and typing only.
    for (
      let i = 0;
      i < 5 && (await page.evaluate(() => document.activeElement?.getAttribute("name"))) !== "email";
      i++
    )
      await page.keyboard.press("Tab");
    await page.keyboard.type(email);
    await page.keyboard.press("Tab");
    await page.keyboard.type(password);
    await page.keyboard.press("Tab");
    await page.keyboard.type(recovery[0] as string);
    await page.keyboard.press("Enter");
    // Back on the page the person was on when they signed out.
    await page.getByRole("heading", { name: `Deliveries to ${receiver.url}` }).waitFor();
    expect(
      await page.getByRole("alert").count(),
      (await page.getByRole("alert").allTextContents()).join(" | "),
    ).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  }, 120_000);

  it("fits a wide screen too, and a wrong code is said plainly", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${t.partnerUrl}/portal/`);
    await page.getByRole("heading", { name: "Sign in to the partner portal" }).waitFor();
    await checkPage(page, 1280);
    await page.getByLabel("Email").fill("nobody@example.com");
    await page.getByLabel("Password").fill("not the password at all");
    await page.getByLabel("Code from your authenticator app, or a recovery code").fill("000000");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/\S/);
    await context.close();
  });

  it("creates a consent link with its QR code, accepts it as the sandbox user, and finds the consent", async () => {
    const dev = await member(t, systemClock, partner.partnerId, "developer");
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    await context.addCookies([
      { name: "portal_session", value: (dev.browser.cookie ?? "").split("=")[1] ?? "", url: t.partnerUrl },
    ]);
    const page = await context.newPage();
    await page.goto(`${t.partnerUrl}/portal/consents`);
    await page.getByRole("heading", { level: 1, name: "Consents" }).waitFor();
    await page.getByLabel("The person's phone number (E.164)").fill("+2348000000001");
    await page.getByLabel("Repayment history").check();
    await page.getByRole("button", { name: "Create the link" }).click();
    await page.getByRole("img", { name: "QR code of the consent link" }).waitFor();
    const linkText = (await page.locator(".shown-once").textContent()) ?? "";
    const linkId = /cnl_[0-9A-Z]{26}/.exec(linkText)?.[0] as string;
    expect(linkId).toBeDefined();
    expect(await page.locator(".shown-once code.secret").textContent()).toMatch(/\/consent\//);
    // The recent links show it at once, no reload.
    await page
      .getByRole("table", { name: "Recent consent links" })
      .getByRole("link", { name: linkId })
      .waitFor();
    await checkPage(page, 375);

    // The person's answer, through the sandbox tools.
    await goTo(page, "Sandbox tools");
    await page.getByRole("heading", { level: 1, name: "Sandbox tools" }).waitFor();
    await checkPage(page, 375);
    await page.getByLabel("Consent link id").fill(linkId);
    await page.getByRole("button", { name: "Accept", exact: true }).first().click();
    await page.getByText("Done.").first().waitFor();

    // The consent it wrote, found and revoked in the portal.
    const link = await fetch(`${t.partnerUrl}/partner/v1/consent-links/${linkId}`, {
      headers: { authorization: `Bearer ${partner.sandboxKey}` },
    });
    const consentId = ((await link.json()) as { consentId: string }).consentId;
    expect(consentId).toMatch(/^cns_/);
    await goTo(page, "Consents");
    // The link's row names the consent it became; its page shows it.
    await page.getByRole("link", { name: consentId }).first().click();
    await page.getByRole("heading", { level: 1, name: "Consent" }).waitFor();
    await page.locator(".facts").getByText("ACTIVE").waitFor();
    await checkPage(page, 375);
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Revoke", exact: true }).click();
    await page
      .locator(".facts")
      .getByText(/^REVOKED/)
      .waitFor();
    await context.close();
  });

  it("accepts a mandate as the sandbox person and shows the disbursement, its repayments and the books", async () => {
    const u = await createConsentedUser(t, partner.partnerId);
    const day = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
    const offer = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: partner.sandboxKey,
      headers: { "idempotency-key": `portal-${u.userId}` },
      body: {
        userId: u.userId,
        principalKobo: "5000000",
        destination: "BANK",
        reference: `portal-${u.userId}`,
        repaymentSchedule: {
          installments: [
            { dueDate: day(30), amountKobo: "2750000" },
            { dueDate: day(60), amountKobo: "2750000" },
          ],
        },
      },
    });
    expect(offer.status).toBe(200);
    const id = offer.body.id as string;
    const dev = await member(t, systemClock, partner.partnerId, "developer");
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    await context.addCookies([
      { name: "portal_session", value: (dev.browser.cookie ?? "").split("=")[1] ?? "", url: t.partnerUrl },
    ]);
    const page = await context.newPage();
    await page.goto(`${t.partnerUrl}/portal/sandbox`);
    await page.getByRole("heading", { level: 1, name: "Sandbox tools" }).waitFor();
    const mandate = page.locator("form", { hasText: "Answer a repayment mandate as the person" });
    await mandate.getByLabel("Disbursement id").fill(id);
    await mandate.getByRole("button", { name: "Accept" }).click();
    await mandate.getByText("Done.").waitFor();

    await goTo(page, "Disbursements");
    await page.getByRole("table", { name: "Recent disbursements" }).getByRole("link", { name: id }).click();
    await page.getByText("₦50,000.00 to the bank").waitFor();
    // Accepted, the payout goes out: once it has, the page looked up again shows it DELIVERED.
    await eventually(
      async () =>
        (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}`, { key: partner.sandboxKey })).body
          .status === "DELIVERED",
      { timeoutMs: 60_000, what: "the payout DELIVERED" },
    );
    await page.reload();
    await page.locator(".facts").getByText("DELIVERED").waitFor();
    await page.getByRole("cell", { name: "₦27,500.00" }).first().waitFor();
    expect(await page.getByRole("cell", { name: "₦27,500.00" }).count()).toBe(2);
    expect(await page.getByText("₦55,000.00").count()).toBeGreaterThan(0);
    await checkPage(page, 375);
    await context.close();
  });

  it("shows every page without an accessibility violation or sideways scrolling at 375 and 1280 px, and edits a webhook by keyboard alone", async () => {
    const admin = await member(t, systemClock, partner.partnerId, "admin");
    const hook = await fetch(`${t.partnerUrl}/partner/v1/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${partner.sandboxKey}`, "content-type": "application/json" },
      body: JSON.stringify({ url: `${receiver.url}/keyboard`, events: ["consent.*"] }),
    });
    const webhookId = ((await hook.json()) as { id: string }).id;
    for (const width of [375, 1280]) {
      const context = await browser.newContext({ viewport: { width, height: 900 } });
      await context.addCookies([
        {
          name: "portal_session",
          value: (admin.browser.cookie ?? "").split("=")[1] ?? "",
          url: t.partnerUrl,
        },
      ]);
      const page = await context.newPage();
      for (const [path, title] of [
        ["/", "Overview (sandbox)"],
        ["/api-keys", "API keys (sandbox)"],
        ["/webhooks", "Webhooks"],
        [`/webhooks/${webhookId}`, `Deliveries to ${receiver.url}/keyboard`],
        ["/consents", "Consents"],
        ["/disbursements", "Disbursements and books"],
        ["/events", "Events"],
        ["/requests", "Requests"],
        ["/signing-keys", "Signing keys"],
        ["/sandbox", "Sandbox tools"],
        ["/team", "Team"],
      ] as const) {
        await page.goto(`${t.partnerUrl}/portal${path}`);
        await page.getByRole("heading", { level: 1, name: title }).waitFor();
        await page.waitForLoadState("networkidle");
        // Each page saved for a reviewer (test-screenshots/), by its path.
        await checkPage(page, width, `page${path.replaceAll("/", "-").replace(/-whk_.*/, "-webhook")}`);
      }
      await context.close();
    }

    // Keyboard alone: Tab to the subscription's Edit, open it, change the description, save.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([
      { name: "portal_session", value: (admin.browser.cookie ?? "").split("=")[1] ?? "", url: t.partnerUrl },
    ]);
    const page = await context.newPage();
    await page.goto(`${t.partnerUrl}/portal/webhooks`);
    await page.getByRole("heading", { level: 1, name: "Webhooks" }).waitFor();
    await page.waitForLoadState("networkidle");
    const tabTo = async (matches: () => Promise<boolean>) => {
      for (let i = 0; i < 200 && !(await matches()); i++) await page.keyboard.press("Tab");
      expect(await matches()).toBe(true);
    };
    const focused = () =>
      page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null;
        return {
          text: el?.textContent ?? "",
          name: el?.getAttribute("name") ?? "",
          form: el?.closest("form")?.getAttribute("aria-label") ?? "",
        };
      });
    const card = `${receiver.url}/keyboard`;
    await tabTo(async () => {
      const f = await focused();
      return (
        f.text === "Edit" &&
        (await page.evaluate(() => document.activeElement?.closest("li")?.textContent ?? "")).includes(card)
      );
    });
    await page.keyboard.press("Enter");
    await tabTo(async () => {
      const f = await focused();
      return f.name === "description" && f.form.includes(card);
    });
    await page.keyboard.type("edited by keyboard");
    await tabTo(async () => {
      const f = await focused();
      return f.text === "Save" && f.form.includes(card);
    });
    await page.keyboard.press("Enter");
    await page.getByText("edited by keyboard").waitFor();
    const after = await fetch(`${t.partnerUrl}/partner/v1/webhooks/${webhookId}`, {
      headers: { authorization: `Bearer ${partner.sandboxKey}` },
    });
    expect(((await after.json()) as { description: string }).description).toBe("edited by keyboard");
    await context.close();
  }, 120_000);
  it("works with the keyboard alone: every control on every page reached with its focus shown, and the main actions done without a mouse", async () => {
    const own = await createPartner(t, "Keyboard Lending");
    const admin = await member(t, systemClock, own.partnerId, "admin");
    const key = { authorization: `Bearer ${own.sandboxKey}`, "content-type": "application/json" };
    const hook = await fetch(`${t.partnerUrl}/partner/v1/webhooks`, {
      method: "POST",
      headers: key,
      body: JSON.stringify({ url: `${receiver.url}/keyboard-only`, events: ["consent.*"] }),
    });
    const webhookId = ((await hook.json()) as { id: string }).id;
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([
      { name: "portal_session", value: (admin.browser.cookie ?? "").split("=")[1] ?? "", url: t.partnerUrl },
    ]);
    const page = await context.newPage();
    page.on("dialog", (d) => void d.accept());
    const focused = () =>
      page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null;
        return `${el?.getAttribute("name") ?? ""}|${(el?.textContent ?? "").trim()}|${el?.getAttribute("aria-label") ?? ""}|${el instanceof HTMLInputElement ? el.value : ""}|${el instanceof HTMLInputElement ? (el.labels?.[0]?.textContent ?? "").trim() : ""}`;
      });
    /** Tabs forward until `matches` says focus is on the control wanted (at most 300 presses). */
    const tabTo = async (matches: (f: string) => boolean, what: string) => {
      for (let i = 0; i < 300; i++) {
        if (matches(await focused())) return;
        await page.keyboard.press("Tab");
      }
      throw new Error(`Tab never reached ${what}`);
    };
    const heading = (name: string) => page.getByRole("heading", { level: 1, name }).waitFor();

    // Every page: Tab all the way round.
    for (const [path, title] of [
      ["/", "Overview (sandbox)"],
      ["/api-keys", "API keys (sandbox)"],
      ["/webhooks", "Webhooks"],
      [`/webhooks/${webhookId}`, `Deliveries to ${receiver.url}/keyboard-only`],
      ["/consents", "Consents"],
      ["/disbursements", "Disbursements and books"],
      ["/events", "Events"],
      ["/requests", "Requests"],
      ["/signing-keys", "Signing keys"],
      ["/sandbox", "Sandbox tools"],
      ["/team", "Team"],
    ] as const) {
      await page.goto(`${t.partnerUrl}/portal${path}`);
      await heading(title);
      await page.waitForLoadState("networkidle");
      const reached = await tabCycle(page);
      expect(reached.length, path).toBeGreaterThan(5);
    }

    // The environment switch in the bar: arrow keys on it, and back.
    await page.goto(`${t.partnerUrl}/portal/`);
    await heading("Overview (sandbox)");
    await tabTo((f) => f.startsWith("env|"), "the environment switch");
    await page.keyboard.press("ArrowDown");
    await heading("Overview (production)");
    await tabTo((f) => f.startsWith("env|"), "the environment switch");
    await page.keyboard.press("ArrowUp");
    await heading("Overview (sandbox)");

    // Navigation by Enter on a link; then roll the key, and the new one is shown with its copy button.
    await tabTo((f) => f.startsWith("|API keys|"), "the API keys link");
    await page.keyboard.press("Enter");
    await heading("API keys (sandbox)");
    await tabTo((f) => f.startsWith("|Roll|"), "Roll");
    await page.keyboard.press("Enter");
    const rolled = (await page.locator(".shown-once code.secret").textContent()) ?? "";
    const withRolled = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
      headers: { authorization: `Bearer ${rolled}` },
    });
    expect(withRolled.status).toBe(200);

    // A consent link made by keyboard (Enter in a field submits), accepted as the person in the sandbox tools.
    await page.goto(`${t.partnerUrl}/portal/consents`);
    await heading("Consents");
    await tabTo((f) => f.startsWith("phone|"), "the phone field");
    await page.keyboard.type("+2348000000001");
    await page.keyboard.press("Enter");
    const linkText =
      /cnl_[0-9A-Z]{26}/.exec((await page.locator(".shown-once").textContent()) ?? "")?.[0] ?? "";
    expect(linkText).toMatch(/^cnl_[0-9A-Z]{26}$/);
    await page.goto(`${t.partnerUrl}/portal/sandbox`);
    await heading("Sandbox tools");
    await tabTo((f) => f.endsWith("|Consent link id"), "the consent link field");
    await page.keyboard.type(linkText);
    await tabTo((f) => f.startsWith("|Accept|"), "Accept");
    await page.keyboard.press("Enter");
    await page.getByRole("status").filter({ hasText: "Done." }).first().waitFor();

    // The event it sent, looked up by keyboard; then replayed from the subscription's page by keyboard.
    const eventId = await eventually(
      async () => {
        const events = (await (
          await fetch(`${t.partnerUrl}/partner/v1/events`, { headers: key })
        ).json()) as {
          events: { id: string; type: string }[];
        };
        return events.events.find((e) => e.type === "consent.granted")?.id;
      },
      { timeoutMs: 60_000, what: "the consent.granted event" },
    );
    expect(eventId).toMatch(/^evt_/);
    await page.goto(`${t.partnerUrl}/portal/events`);
    await heading("Events");
    await page.keyboard.press("/");
    await page.keyboard.type(eventId);
    await page.keyboard.press("Enter");
    await heading("Event");
    await page.locator(".facts").getByText("consent.granted").waitFor();

    // The page lists the deliveries recorded when it loads: open it once one of them is.
    await eventually(
      async () =>
        (
          await sql(
            t.app.orm.em.fork(),
            "select 1 from webhook_deliveries where webhook_id = $1 and status = 'DELIVERED'",
            [webhookId],
          )
        ).length > 0,
      { timeoutMs: 60_000, what: "a delivery to the subscription recorded" },
    );
    await page.goto(`${t.partnerUrl}/portal/webhooks/${webhookId}`);
    await heading(`Deliveries to ${receiver.url}/keyboard-only`);
    await page.getByText("DELIVERED").first().waitFor();
    const copies = () => receiver.received.filter((r) => r.body.includes(eventId)).length;
    const before = copies();
    expect(before).toBeGreaterThan(0);
    // The delivery's page by its link (Tab, Enter), then Replay there.
    await tabTo((f) => f.startsWith("|dlv_"), "the delivery's link");
    await page.keyboard.press("Enter");
    await heading("Delivery");
    await tabTo((f) => f.startsWith("|Replay|"), "Replay");
    await page.keyboard.press("Enter");
    await eventually(() => copies() > before, { timeoutMs: 60_000, what: "the replayed copy" });
    expect(copies()).toBe(before + 1);

    // A list longer than a page: 20 links, then the rest after Load more (by keyboard).
    for (let n = 0; n < 21; n++) {
      const made = await fetch(`${t.partnerUrl}/partner/v1/consent-links`, {
        method: "POST",
        headers: key,
        body: JSON.stringify({
          phoneNumber: "+2348000000002",
          scopes: ["standing"],
          ledgerWindowDays: 90,
          expiresInHours: 24,
        }),
      });
      expect(made.status).toBe(200);
    }
    await page.goto(`${t.partnerUrl}/portal/consents`);
    await heading("Consents");
    const linkRows = page.getByRole("table", { name: "Recent consent links" }).locator("tbody tr");
    await expect.poll(() => linkRows.count()).toBe(20);
    await tabTo((f) => f.startsWith("|Load more|"), "Load more");
    await page.keyboard.press("Enter");
    await expect.poll(() => linkRows.count()).toBe(22);

    // The sandbox reset, confirmed in the browser's own dialog.
    await page.goto(`${t.partnerUrl}/portal/sandbox`);
    await heading("Sandbox tools");
    await tabTo((f) => f.startsWith("|Reset the sandbox|"), "Reset the sandbox");
    await page.keyboard.press("Enter");
    await page.getByRole("status").filter({ hasText: "Reset: 1 consents" }).waitFor();
    await context.close();
  }, 180_000);
});
