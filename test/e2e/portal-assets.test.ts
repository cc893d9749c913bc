import { existsSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

// The portal's files as the service serves them: the shell under a strict CSP, hashed assets cached for a year
// and compressed, and the app booting in Chromium under that policy.
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser)
  process.stderr.write(
    `\nportal browser test SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium)\n\n`,
  );

let t: TestApp;
let browser: Browser | undefined;
beforeAll(async () => {
  t = await startTestApp();
  if (haveBrowser)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
});

async function shell() {
  const res = await fetch(`${t.partnerUrl}/portal`);
  const html = await res.text();
  const script = /<script type="module" src="(\/portal\/assets\/[^"]+\.js)"><\/script>/.exec(html)?.[1];
  return { res, html, script };
}

describe("the portal's files", () => {
  it("serve the shell at /portal and every page path under it, revalidated, under a strict CSP", async () => {
    const { res, html, script } = await shell();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(script).toBeDefined();
    // No inline script anywhere in the shell: every <script> names its file.
    expect(html.match(/<script\b[^>]*>/g)?.every((tag) => /\bsrc="/.test(tag))).toBe(true);
    const deep = await fetch(`${t.partnerUrl}/portal/webhooks/whk_01JCQ8ZV3D5Y6X7W8V9T0S1R2Q`);
    expect(deep.status).toBe(200);
    expect(await deep.text()).toBe(html);
  });

  it("serve hashed assets immutable, gzip or brotli as the client accepts, and refuse the rest", async () => {
    const { script } = await shell();
    const gz = await fetch(`${t.partnerUrl}${script}`, { headers: { "accept-encoding": "gzip" } });
    expect(gz.status).toBe(200);
    expect(gz.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(gz.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(gz.headers.get("content-encoding")).toBe("gzip");
    expect(gz.headers.get("vary")).toBe("accept-encoding");
    const br = await fetch(`${t.partnerUrl}${script}`, { headers: { "accept-encoding": "gzip, br" } });
    expect(br.headers.get("content-encoding")).toBe("br");
    const plain = await fetch(`${t.partnerUrl}${script}`, { headers: { "accept-encoding": "identity" } });
    expect(plain.headers.get("content-encoding")).toBeNull();
    const text = await plain.text();
    expect(text.length).toBeGreaterThan(1000);
    // The compressed copy is the same script.
    const raw = await fetch(`${t.partnerUrl}${script}`, { headers: { "accept-encoding": "gzip" } });
    expect(raw.headers.get("content-length")).not.toBe(String(text.length));
    expect(gunzipSync(Buffer.from(await (await rawBytes(script as string)).arrayBuffer())).toString()).toBe(
      text,
    );

    expect((await fetch(`${t.partnerUrl}/portal/assets/main-NOTAHASH.js`)).status).toBe(404);
    expect((await fetch(`${t.partnerUrl}/portal/assets/..%2F..%2Fpackage.json`)).status).toBe(404);
    const post = await fetch(`${t.partnerUrl}/portal`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    const head = await fetch(`${t.partnerUrl}/portal`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  it.skipIf(!haveBrowser)(
    "boot in Chromium under the served CSP, asking for a sign-in, nothing scrolling sideways at 375 px",
    async () => {
      const context = await (browser as Browser).newContext({ viewport: { width: 375, height: 720 } });
      const page = await context.newPage();
      const problems: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error" && /Content Security Policy|Refused to/.test(m.text()))
          problems.push(m.text());
      });
      page.on("pageerror", (e) => problems.push(e.message));
      // Without a session every page path asks the person to sign in, and the app runs under the served CSP.
      await page.goto(`${t.partnerUrl}/portal/signing-keys`);
      await page.getByRole("heading", { level: 1, name: "Sign in to the partner portal" }).waitFor();
      expect(new URL(page.url()).pathname).toBe("/portal/signing-keys");
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
      expect(problems).toEqual([]);
      await context.close();
    },
  );
});

/** The asset's bytes exactly as sent with gzip (fetch would inflate them). */
async function rawBytes(script: string): Promise<Response> {
  const http = await import("node:http");
  return new Promise((resolve, reject) => {
    http
      .get(`${t.partnerUrl}${script}`, { headers: { "accept-encoding": "gzip" } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(new Response(Buffer.concat(chunks))));
      })
      .on("error", reject);
  });
}
