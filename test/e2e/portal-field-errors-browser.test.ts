import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { checkPage, haveBrowser, launchBrowser, signedInPage } from "../support/browser.ts";
import { type MemberFixture, member } from "../support/portal.ts";

// The portal says what the API said of a refused field beside that field, not only "Some fields are not valid":
// a webhook whose URL does not resolve is refused `validation_failed` naming `url`, and the reason shows under
// the URL input, which is marked invalid and described by it. Times read in Lagos, and each page names its tab.
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

describe.skipIf(!haveBrowser)("a refused field in the portal", () => {
  it("is said beside the field, the input marked invalid, and the page stays accessible", async () => {
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
});
