import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { checkPage, haveBrowser, launchBrowser, signedInPage } from "../support/browser.ts";
import { rest } from "../support/clients.ts";
import { type MemberFixture, member } from "../support/portal.ts";

// "What happened to my call?", in Chromium: a partner holding the error body of a failed call pastes it into the
// request log's search and reads the call there, its code and its body; the list shows it within seconds. Both
// pages pass axe and fit 375 and 1280 px.
let t: TestApp;
let p: PartnerFixture;
let dev: MemberFixture;
let browser: Browser;
beforeAll(async () => {
  if (!haveBrowser) return;
  t = await startTestApp();
  p = await createPartner(t, "Kobo Credit & Sons");
  dev = await member(t, systemClock, p.partnerId, "developer");
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
});

describe.skipIf(!haveBrowser)("the request log in the portal", () => {
  it("finds a failed call by the request id in its error body, shows its code and body, and lists it within seconds", async () => {
    const failed = await rest(
      t.partnerUrl,
      "GET",
      "/partner/v1/users/usr_01JZZZZZZZZZZZZZZZZZZZZZZZ/snapshot",
      {
        key: p.sandboxKey,
      },
    );
    expect(failed.status).toBeGreaterThanOrEqual(400);
    const body = failed.body as { code: string; requestId: string };
    for (const width of [375, 1280]) {
      const page = await signedInPage(browser, t, dev, width);
      await page.goto(`${t.partnerUrl}/portal/requests`);
      await page.getByRole("heading", { level: 1, name: "Requests" }).waitFor();
      // The list shows the call once its batch is written (a fraction of a second): Refresh until it does.
      const row = page.getByRole("link", { name: body.requestId });
      for (let i = 0; i < 50 && !(await row.isVisible()); i++) {
        await page.getByRole("button", { name: "Refresh" }).click();
        await page.waitForLoadState("networkidle");
      }
      await row.waitFor();
      await checkPage(page, width, "requests");
      // The whole error body pasted: the id in it is found.
      await page.getByLabel("Request id").fill(JSON.stringify(body));
      await page.getByRole("button", { name: "Find" }).click();
      await page.getByRole("heading", { level: 1, name: "Request" }).waitFor();
      expect(new URL(page.url()).pathname).toBe(`/portal/requests/${body.requestId}`);
      await page.getByText(body.code, { exact: true }).first().waitFor();
      await page
        .locator("pre")
        .filter({ hasText: `"requestId": "${body.requestId}"` })
        .waitFor();
      await page.waitForLoadState("networkidle");
      await checkPage(page, width, "request");
      // From any page, "/" puts the cursor in the header's "Go to an id", which takes it to the call's page.
      await page.goto(`${t.partnerUrl}/portal/`);
      await page.getByRole("heading", { level: 1 }).first().waitFor();
      await page.keyboard.press("/");
      expect(await page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("q");
      await page.keyboard.type(`see ${body.requestId} in the logs`);
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { level: 1, name: "Request" }).waitFor();
      expect(new URL(page.url()).pathname).toBe(`/portal/requests/${body.requestId}`);
      await checkPage(page, width);
      await page.context().close();
    }
  }, 120_000);
});
