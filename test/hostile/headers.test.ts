import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { openPage } from "../support/consent-page.ts";

// What a partner writes never becomes header syntax, a portal call is accepted from the portal's own origin
// only, and no answer of the service may be sniffed as another type.
let t: TestApp;
let fixed: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp();
  fixed = await startTestApp({ config: { publicUrl: "https://portal.lender.example" } });
  p = await createPartner(t);
});
afterAll(async () => {
  await t?.stop();
  await fixed?.stop();
});

const link = async (redirectUrl: string) => {
  const u = await createUser(t);
  return rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
    key: p.sandboxKey,
    body: { phoneNumber: u.phoneNumber, scopes: ["standing"], ledgerWindowDays: 30, redirectUrl },
  });
};

describe("a consent link's redirectUrl", () => {
  it("must name its host as a host: CSP syntax in it is refused, and never reaches the page's header", async () => {
    for (const url of [
      "https://evil.example;sandbox/x",
      "https://evil.example%3Bsandbox/x",
      'https://evil"example.com/x',
      "https://evil.example,sandbox.example/x",
      "https://*.example/x",
      "https://under_score.example/x",
    ]) {
      const res = await link(url);
      expect(res.status, url).toBe(422);
      expect(res.body.details.fields.redirectUrl, url).toMatch(/host/);
    }
    const ok = await link("https://lender.example/after");
    expect(ok.status).toBe(200);
    const page = await fetch(ok.body.url, { headers: { accept: "text/html" } });
    expect(page.headers.get("content-security-policy")).toContain(
      "form-action 'self' https://lender.example;",
    );
    // A link stored before the check (written here behind the API's back) still puts nothing of it in the header.
    await sql(t.app.orm.em.fork(), "update consent_links set redirect_url = $1 where id = $2", [
      "https://evil.example;sandbox allow-scripts/x",
      ok.body.id,
    ]);
    const again = await fetch(ok.body.url, { headers: { accept: "text/html" } });
    const csp = again.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("form-action 'self';");
    expect(csp).not.toMatch(/sandbox|evil/);
  });
});

describe("the portal's Origin check", () => {
  const whoAmI = (base: string, origin: string, host?: string) =>
    fetch(`${base}/portal.v1.PortalAuthService/WhoAmI`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "connect-protocol-version": "1",
        origin,
        ...(host ? { host } : {}),
      },
      body: "{}",
    });

  it("with PUBLIC_URL set, takes that origin alone, not one made up from the Host header", async () => {
    const host = new URL(fixed.partnerUrl).host;
    for (const origin of [`http://${host}`, `https://${host}`, "http://portal.lender.example"]) {
      const res = await whoAmI(fixed.partnerUrl, origin);
      expect(res.status, origin).toBe(403);
      expect((await res.json()).code).toBe("permission_denied");
    }
    const own = await whoAmI(fixed.partnerUrl, "https://portal.lender.example");
    // Past the origin check: no session, so 401.
    expect(own.status).toBe(401);
  });

  it("without PUBLIC_URL, takes the origin the request was addressed to", async () => {
    const res = await whoAmI(t.partnerUrl, t.partnerUrl);
    expect(res.status).toBe(401);
    expect((await whoAmI(t.partnerUrl, "https://elsewhere.example")).status).toBe(403);
  });
});

describe("every answer", () => {
  it("says nosniff, on both listeners, success or error, API, page, document or asset", async () => {
    const u = await createUser(t);
    const l = await link("https://lender.example/after");
    const answers = await Promise.all([
      fetch(`${t.partnerUrl}/partner/v1/keys`, { headers: { authorization: `Bearer ${p.sandboxKey}` } }),
      fetch(`${t.partnerUrl}/partner/v1/keys`),
      fetch(`${t.partnerUrl}/partner/v1/users/${u.userId}/snapshot`, {
        headers: { authorization: `Bearer ${p.sandboxKey}` },
      }),
      fetch(`${t.partnerUrl}/partner/v1/nothing-here`),
      fetch(`${t.partnerUrl}/partner.v1.KeysService/ListKeys`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      }),
      fetch(`${t.partnerUrl}/healthz`),
      fetch(`${t.partnerUrl}/readyz`),
      fetch(`${t.partnerUrl}/partner/v1/openapi.json`),
      fetch(`${t.partnerUrl}/portal`),
      fetch(l.body.url, { headers: { accept: "text/html" } }),
      fetch(`${t.partnerUrl}/consent/not-a-token`),
      fetch(`${t.partnerUrl}/partner/v1/keys`, { method: "PUT" }),
      fetch(`${t.internalUrl}/metrics`),
      fetch(`${t.internalUrl}/healthz`),
    ]);
    for (const res of answers) {
      expect(res.headers.get("x-content-type-options"), `${res.url} ${res.status}`).toBe("nosniff");
      await res.arrayBuffer();
    }
    expect(answers.map((r) => r.status)).toEqual([
      200, 401, 403, 404, 401, 200, 200, 200, 200, 200, 404, 405, 401, 200,
    ]);
    expect((await openPage(l.body.url)).status).toBe(200);
  });

  it("says nosniff and names its request, even where Node refused the request before any handler", async () => {
    const raw = (url: string, request: string) =>
      new Promise<string>((resolve, reject) => {
        let text = "";
        const socket = net.connect(Number(new URL(url).port), "127.0.0.1", () => socket.write(request));
        socket.on("data", (d) => {
          text += String(d);
          // One answer is enough (a keep-alive connection stays open after it).
          if (/\r\n\r\n/.test(text) && /content-length: (\d+)/i.test(text)) {
            const length = Number(/content-length: (\d+)/i.exec(text)?.[1]);
            if (Buffer.byteLength(text.slice(text.indexOf("\r\n\r\n") + 4)) >= length) socket.destroy();
          }
        });
        socket.on("close", () => resolve(text));
        socket.on("error", reject);
      });
    const cases: [string, string, number][] = [
      [t.partnerUrl, "NOT HTTP AT ALL\r\n\r\n", 400],
      [t.partnerUrl, `GET / HTTP/1.1\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
      [t.partnerUrl, "GET /healthz HTTP/1.1\r\n\r\n", 400],
      [t.partnerUrl, "GET /healthz HTTP/1.1\r\nhost: x\r\nexpect: weird\r\n\r\n", 417],
      [t.internalUrl, "GET /healthz HTTP/1.1\r\n\r\n", 400],
      [t.internalUrl, "GET /healthz HTTP/1.1\r\nhost: x\r\nexpect: weird\r\n\r\n", 417],
    ];
    for (const [url, request, status] of cases) {
      const answer = await raw(url, request);
      const what = `${request.slice(0, 40)} → ${answer.slice(0, 300)}`;
      expect(answer, what).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(answer.toLowerCase(), what).toContain("x-content-type-options: nosniff");
      expect(answer.toLowerCase(), what).toMatch(/x-request-id: req_[0-9a-z]{26}/);
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
      expect(body.code, what).toMatch(/^[a-z_]+$/);
      expect(body.requestId, what).toMatch(/^req_/);
    }
  });
});
