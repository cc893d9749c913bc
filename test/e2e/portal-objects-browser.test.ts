import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/platform/clock.ts";
import { zonedTime } from "../../src/portal/web/time.tsx";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { checkPage, haveBrowser, launchBrowser, signedInPage, tabCycle } from "../support/browser.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { type MemberFixture, member } from "../support/portal.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// Every object a page, every id a link, in Chromium: with a sandbox that has a webhook, a consent link accepted,
// a disbursement paid out and an installment collected, a person follows every id link from every list and
// every detail page, and each page loads its object (no error) and passes axe at 1280 and 375 px. The test saves
// a screenshot of each kind of page to test-screenshots/.
let t: TestApp;
let p: PartnerFixture;
let admin: MemberFixture;
let receiver: TestReceiver;
let browser: Browser;
const seeded: Record<string, string> = {};
beforeAll(async () => {
  if (!haveBrowser) return;
  t = await startTestApp();
  p = await createPartner(t, "Kobo Credit & Sons");
  admin = await member(t, systemClock, p.partnerId, "admin");
  receiver = await startReceiver();
  browser = await launchBrowser();
  await seed();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await t?.stop();
});

const post = (path: string, body?: unknown, headers?: Record<string, string>) =>
  rest(t.partnerUrl, "POST", path, { key: p.sandboxKey, ...(body === undefined ? {} : { body }), headers });
const get = (path: string) => rest(t.partnerUrl, "GET", path, { key: p.sandboxKey });

/** A sandbox with one of everything the portal shows. */
async function seed() {
  const hook = await post("/partner/v1/webhooks", { url: receiver.url, events: ["*"] });
  expect(hook.status).toBe(200);
  seeded.webhook = hook.body.id;
  const link = await post("/partner/v1/consent-links", {
    phoneNumber: "+2348000000002",
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  seeded.link = link.body.id;
  seeded.consent = (await post(`/partner/v1/sandbox/consent-links/${link.body.id}/accept`)).body.consentId;
  const offer = await post(
    "/partner/v1/disbursements",
    {
      userId: "usr_sandboxEstablished",
      principalKobo: "1000000",
      destination: "WALLET",
      reference: "portal-objects",
      repaymentSchedule: {
        installments: [
          {
            dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10),
            amountKobo: "1100000",
          },
        ],
      },
    },
    { "idempotency-key": "portal-objects" },
  );
  expect(offer.status).toBe(200);
  seeded.disbursement = offer.body.id;
  await acceptMandate(t, p.sandboxKey, offer.body.id);
  await eventually(
    async () => (await get(`/partner/v1/disbursements/${offer.body.id}`)).body.status === "DELIVERED",
    {
      timeoutMs: 60_000,
      what: "the payout DELIVERED",
    },
  );
  const [repayment] = (await get(`/partner/v1/disbursements/${offer.body.id}/repayments`)).body.repayments;
  expect(
    (await post(`/partner/v1/sandbox/repayments/${repayment.id}/collect`, { outcome: "SUCCESS" })).status,
  ).toBe(200);
  // Every event delivered, so each delivery has its attempt.
  await eventually(async () => receiver.received.length >= 3, {
    timeoutMs: 30_000,
    what: "three deliveries",
  });
  const failed = await get("/partner/v1/users/usr_nobody/snapshot");
  expect(failed.status).toBe(403);
  seeded.request = failed.body.requestId;
}

const KINDS: Record<string, RegExp> = {
  request: /^\/portal\/requests\/req_/,
  event: /^\/portal\/events\/evt_/,
  disbursement: /^\/portal\/disbursements\/dsb_/,
  webhook: /^\/portal\/webhooks\/whk_/,
  delivery: /^\/portal\/deliveries\/dlv_/,
  consent: /^\/portal\/consents\/cns_/,
  "consent-link": /^\/portal\/consent-links\/cnl_/,
  user: /^\/portal\/users\/usr_/,
};
const kindOf = (path: string) => Object.entries(KINDS).find(([, shape]) => shape.test(path))?.[0];

/** Opens a portal path and waits until its page has loaded what it shows. */
async function open(page: Page, path: string) {
  await page.goto(`${t.partnerUrl}${path}`);
  await page.locator("h1").waitFor();
  await page.waitForLoadState("networkidle");
  await expect.poll(() => page.getByText("Loading…").count()).toBe(0);
}

/** The id links on the page, as paths. */
const idLinks = (page: Page) =>
  page.locator("main a.id-link").evaluateAll((as) => as.map((a) => (a as HTMLAnchorElement).pathname));

describe.skipIf(!haveBrowser)("every object a page, every id a link", () => {
  it("reaches every kind of object by following id links from the lists, and each page shows its object", async () => {
    const page = await signedInPage(browser, t, admin, 1280);
    const queue = [
      "/portal/",
      "/portal/requests",
      "/portal/events",
      "/portal/webhooks",
      "/portal/consents",
      "/portal/disbursements",
    ];
    const seen = new Set(queue);
    const kinds = new Set<string>();
    while (queue.length) {
      const path = queue.shift() as string;
      await open(page, path);
      expect(await page.getByRole("alert").allTextContents(), `an error on ${path}`).toEqual([]);
      const kind = kindOf(path);
      if (kind && !kinds.has(kind)) {
        kinds.add(kind);
        // A detail page names its object in the tab's title and, below the breadcrumbs, the id whole.
        expect(await page.title()).toContain(path.split("/").at(-1));
        await checkPage(page, 1280, kind);
        // Keyboard alone: Tab reaches every control on the page, each with its focus shown.
        await page.locator("body").focus();
        await tabCycle(page);
      }
      for (const link of await idLinks(page))
        if (!seen.has(link)) {
          seen.add(link);
          queue.push(link);
        }
    }
    expect([...kinds].sort()).toEqual(Object.keys(KINDS).sort());
    for (const id of Object.values(seeded))
      expect(
        [...seen].some((s) => s.endsWith(`/${id}`)),
        id,
      ).toBe(true);
    await page.context().close();
  }, 120_000);

  it("shows each kind of page at 375 px with the app's bar leaving the page within 120 px of the top", async () => {
    const page = await signedInPage(browser, t, admin, 375);
    const paths = [
      "/portal/",
      `/portal/disbursements/${seeded.disbursement}`,
      `/portal/consents/${seeded.consent}`,
      `/portal/consent-links/${seeded.link}`,
      `/portal/webhooks/${seeded.webhook}`,
      `/portal/users/usr_sandboxEstablished`,
      `/portal/requests/${seeded.request}`,
      `/portal/events/${(await get("/partner/v1/events")).body.events[0].id}`,
      `/portal/deliveries/${(await get(`/partner/v1/webhooks/${seeded.webhook}/deliveries`)).body.deliveries[0].id}`,
    ];
    for (const path of paths) {
      await open(page, path);
      await checkPage(page, 375, kindOf(path) ?? "overview");
      expect(await page.locator("main").evaluate((m) => m.getBoundingClientRect().top)).toBeLessThanOrEqual(
        120,
      );
    }
    // Dense lists read a row per line at 375 px too: the audit log's user agents and the books' cells do not wrap
    // a word per line (their tables scroll sideways instead).
    for (const [path, table] of [
      ["/portal/team", "Audit log"],
      ["/portal/disbursements", "Entries of the period, oldest first"],
    ] as const) {
      await open(page, path);
      const rows = page.getByRole("table", { name: table }).locator("tbody tr");
      await rows.first().waitFor();
      const heights = await rows.evaluateAll((trs) => trs.map((tr) => tr.getBoundingClientRect().height));
      expect(Math.max(...heights), `${table} row height`).toBeLessThan(48);
      await checkPage(page, 375, path.slice("/portal/".length));
    }
    // The navigation is behind "Menu", reached and used by keyboard alone.
    await page.getByRole("button", { name: "Menu" }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("link", { name: "Consents" }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { level: 1, name: "Consents" }).waitFor();
    expect(await page.getByRole("link", { name: "Disbursements" }).isVisible()).toBe(false);
    await checkPage(page, 375, "consents");
    await page.context().close();
  }, 60_000);

  it("jumps from the bar to a disbursement, a consent, a delivery and a user by id, from the keyboard", async () => {
    const page = await signedInPage(browser, t, admin, 1280);
    await open(page, "/portal/");
    const delivery = (await get(`/partner/v1/webhooks/${seeded.webhook}/deliveries`)).body.deliveries[0].id;
    for (const [id, heading] of [
      [seeded.disbursement, "Disbursement"],
      [seeded.consent, "Consent"],
      [delivery, "Delivery"],
      ["usr_sandboxEstablished", "User"],
    ] as const) {
      await page.keyboard.press("Control+k");
      await page.keyboard.type(`see ${id}`);
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { level: 1, name: heading, exact: true }).waitFor();
      expect(new URL(page.url()).pathname.endsWith(`/${id}`)).toBe(true);
    }
    // Times are in Lagos until the person picks another zone in their menu; the page shows it at once.
    const shown = page.locator("main time").first();
    const instant = new Date((await shown.getAttribute("datetime")) ?? "");
    expect(await shown.textContent()).toBe(zonedTime(instant, "Africa/Lagos"));
    await page.locator(".member-menu summary").click();
    await page.getByLabel("Show times in").selectOption("UTC");
    await expect.poll(() => shown.textContent()).toBe(zonedTime(instant, "UTC"));
    await page.context().close();
  });

  it("acts for the person from an object's own page in the sandbox: accepts a consent link and a mandate", async () => {
    const link = await post("/partner/v1/consent-links", {
      phoneNumber: "+2348000000001",
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const page = await signedInPage(browser, t, admin, 1280);
    await open(page, `/portal/consent-links/${link.body.id}`);
    await page.locator(".facts").getByText("PENDING").waitFor();
    await page.getByRole("button", { name: "Accept as the person" }).click();
    // The page reads the link again: accepted, with the consent it became, a link to its page; the tools for a
    // pending link are gone.
    await page.locator(".facts").getByText("ACCEPTED").waitFor();
    await page.locator(".facts").getByRole("link", { name: /^cns_/ }).waitFor();
    expect(await page.getByRole("button", { name: "Accept as the person" }).count()).toBe(0);
    await checkPage(page, 1280, "consent-link-sandbox");

    const offer = await post(
      "/partner/v1/disbursements",
      {
        userId: "usr_sandboxEstablished",
        principalKobo: "500000",
        destination: "WALLET",
        reference: "portal-objects-2",
        repaymentSchedule: {
          installments: [
            {
              dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10),
              amountKobo: "550000",
            },
          ],
        },
      },
      { "idempotency-key": "portal-objects-2" },
    );
    await open(page, `/portal/disbursements/${offer.body.id}`);
    await page.locator(".facts").getByText("AWAITING_ACCEPTANCE").waitFor();
    await page.getByRole("button", { name: "Accept the mandate as the person" }).click();
    await page.getByRole("status").filter({ hasText: "done." }).waitFor();
    await page.locator(".timeline").getByText("Mandate accepted by the person").waitFor();
    // In production the page offers no sandbox tool.
    await page.locator(".member-menu summary").focus();
    await page.getByRole("combobox", { name: "Environment" }).selectOption("production");
    await page.getByRole("heading", { level: 1, name: "Disbursement" }).waitFor();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("button", { name: /as the person|the payout/ }).count()).toBe(0);
    await page.context().close();
  }, 60_000);

  it("shows another partner's object as not found and nothing else, offers a viewer no action, and fits a long URL", async () => {
    const other = await createPartner(t, "Someone Else");
    const theirs = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: other.sandboxKey,
      body: { url: `${receiver.url}/theirs`, events: ["*"] },
    });
    const viewer = await member(t, systemClock, p.partnerId, "viewer");
    const page = await signedInPage(browser, t, viewer, 375);
    for (const path of [
      `/portal/webhooks/${theirs.body.id}`,
      `/portal/disbursements/${theirs.body.id.replace("whk_", "dsb_")}`,
    ]) {
      await open(page, path);
      await page.getByRole("alert").waitFor();
      expect(await page.getByRole("alert").count(), path).toBe(1);
      expect(await page.locator("main h2").count(), path).toBe(0);
      expect(await page.locator("main button:not(.copy)").count(), path).toBe(0);
    }
    // A viewer reads every page, and is offered no write the API would refuse them.
    const delivery = (await get(`/partner/v1/webhooks/${seeded.webhook}/deliveries`)).body.deliveries[0].id;
    for (const path of [
      `/portal/deliveries/${delivery}`,
      `/portal/webhooks/${seeded.webhook}`,
      `/portal/consents/${seeded.consent}`,
      `/portal/disbursements/${seeded.disbursement}`,
    ]) {
      await open(page, path);
      expect(await page.locator("main button:not(.copy)").allTextContents(), path).toEqual([]);
    }
    // A URL with a long token in it wraps in the breadcrumbs and the heading alike.
    const long = await post("/partner/v1/webhooks", {
      url: `${receiver.url}?token=${"ab12".repeat(24)}`,
      events: ["*"],
    });
    await open(page, `/portal/webhooks/${long.body.id}`);
    await checkPage(page, 375, "webhook-long-url");
    // Escape closes the navigation's menu and the member's, focus back on what opened each.
    await page.getByRole("button", { name: "Menu" }).click();
    await page.keyboard.press("Escape");
    expect(await page.getByRole("button", { name: "Menu" }).getAttribute("aria-expanded")).toBe("false");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Menu");
    await page.locator(".member-menu summary").click();
    await page.getByRole("button", { name: "Sign out", exact: true }).waitFor();
    await page.keyboard.press("Escape");
    expect(await page.getByRole("button", { name: "Sign out", exact: true }).isVisible()).toBe(false);
    await page.context().close();
  }, 60_000);
});
