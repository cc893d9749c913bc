import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { checkPage, haveBrowser, launchBrowser, signedInPage } from "../support/browser.ts";
import { type MemberFixture, member } from "../support/portal.ts";

// The portal says what the API said of a refused field beside that field, not only "Some fields are not valid":
// a webhook whose URL does not resolve is refused `validation_failed` naming `url`, and the reason shows under
// the URL input, which is marked invalid and described by it; each page names its tab. And the only admin of a
// team is offered no Remove (the service would refuse it).
let t: TestApp;
let p: PartnerFixture;
let dev: MemberFixture;
let browser: Browser;
beforeAll(async () => {
  if (!haveBrowser) return;
  t = await startTestApp({
    // No name resolves here: the webhook's host is refused as the API refuses it for a real missing name.
    resolver: async () => {
      throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
    },
  });
  p = await createPartner(t);
  dev = await member(t, systemClock, p.partnerId, "developer");
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
});

describe.skipIf(!haveBrowser)("the portal says what is true", () => {
  it("of a refused field, beside the field, the input marked invalid, and the page stays accessible", async () => {
    for (const width of [375, 1280]) {
      const page = await signedInPage(browser, t, dev, width);
      await page.goto(`${t.partnerUrl}/portal/webhooks`);
      await page.getByRole("heading", { level: 1, name: "Webhooks" }).waitFor();
      expect(await page.title()).toBe("Webhooks · Partner portal");
      const url = page.getByLabel("Endpoint URL");
      await url.fill("https://nowhere.example.invalid/hooks");
      await page.getByRole("button", { name: "Create subscription" }).click();
      const reason = page.locator(".field-error");
      await reason.waitFor();
      expect(await reason.textContent()).toMatch(/does not resolve/);
      expect(await url.getAttribute("aria-invalid")).toBe("true");
      expect(await url.getAttribute("aria-describedby")).toBe(await reason.getAttribute("id"));
      await checkPage(page, width, "webhooks-field-error");
      await page.context().close();
    }
  }, 60_000);
  it("offers the only admin neither Remove nor another role, and says why", async () => {
    const q = await createPartner(t);
    const admin = await member(t, systemClock, q.partnerId, "admin");
    const page = await signedInPage(browser, t, admin, 1280);
    await page.goto(`${t.partnerUrl}/portal/team`);
    await page.getByRole("heading", { level: 1, name: "Team" }).waitFor();
    await page.getByText("The only admin").waitFor();
    expect(await page.getByRole("button", { name: "Remove" }).count()).toBe(0);
    expect(await page.getByLabel("Role").last().isDisabled()).toBe(true);
    await checkPage(page, 1280, "team-only-admin");
    await page.context().close();
  }, 60_000);
});
