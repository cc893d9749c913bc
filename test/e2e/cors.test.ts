import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// Browser code on an operator-listed origin may call the API on every face; any other origin gets no CORS
// header (the browser keeps the answer from its page), and with no origins listed there is no CORS at all.

const APP = "https://app.lender.example";
let open: TestApp;
let closed: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  open = await startTestApp({ config: { corsOrigins: [APP] } });
  closed = await startTestApp();
  p = await createPartner(open);
});
afterAll(async () => {
  await open?.stop();
  await closed?.stop();
});

const preflight = (base: string, path: string, origin: string, method = "POST") =>
  fetch(`${base}${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": "authorization, content-type, idempotency-key",
    },
  });

describe("CORS", () => {
  it("answers a listed origin's preflight for REST, Connect and gRPC-Web paths", async () => {
    for (const path of ["/partner/v1/disbursements", "/partner.v1.KeysService/ListKeys"]) {
      const res = await preflight(open.partnerUrl, path, APP);
      expect(res.status, path).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe(APP);
      expect(res.headers.get("vary")).toMatch(/origin/i);
      const headers = (res.headers.get("access-control-allow-headers") ?? "").toLowerCase();
      for (const h of [
        "authorization",
        "content-type",
        "idempotency-key",
        "connect-protocol-version",
        "x-grpc-web",
      ])
        expect(headers, h).toContain(h);
      expect(res.headers.get("access-control-allow-methods")).toContain("POST");
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    }
  });

  it("lets a listed origin read the answer and its rate-limit and status headers, on every face", async () => {
    const headers = { origin: APP, authorization: `Bearer ${p.sandboxKey}` };
    const viaRest = await fetch(`${open.partnerUrl}/partner/v1/keys`, { headers });
    expect(viaRest.status).toBe(200);
    expect(viaRest.headers.get("access-control-allow-origin")).toBe(APP);
    const exposed = (viaRest.headers.get("access-control-expose-headers") ?? "").toLowerCase();
    for (const h of ["ratelimit", "ratelimit-policy", "retry-after", "x-request-id", "grpc-status"])
      expect(exposed, h).toContain(h);
    const viaConnect = await fetch(`${open.partnerUrl}/partner.v1.KeysService/ListKeys`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: "{}",
    });
    expect(viaConnect.status).toBe(200);
    expect(viaConnect.headers.get("access-control-allow-origin")).toBe(APP);
    const viaWeb = await fetch(`${open.partnerUrl}/partner.v1.KeysService/ListKeys`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      body: new Uint8Array(5),
    });
    expect(viaWeb.status).toBe(200);
    expect(viaWeb.headers.get("access-control-allow-origin")).toBe(APP);
    // An error answer carries them too, so the page can read the error.
    const denied = await fetch(`${open.partnerUrl}/partner/v1/keys`, { headers: { origin: APP } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get("access-control-allow-origin")).toBe(APP);
  });

  it("adds nothing for an origin that is not listed, refuses its preflight, and never covers the hosted pages", async () => {
    const other = "https://evil.example";
    const res = await fetch(`${open.partnerUrl}/partner/v1/keys`, {
      headers: { origin: other, authorization: `Bearer ${p.sandboxKey}` },
    });
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const pre = await preflight(open.partnerUrl, "/partner/v1/disbursements", other);
    expect(pre.status).toBe(403);
    expect(pre.headers.get("access-control-allow-origin")).toBeNull();
    // Near misses of the listed origin are other origins.
    for (const near of [`${APP}.evil.example`, "http://app.lender.example", `${APP}:444`, "null"]) {
      const r = await preflight(open.partnerUrl, "/partner/v1/keys", near, "GET");
      expect(r.headers.get("access-control-allow-origin"), near).toBeNull();
    }
    const page = await fetch(`${open.partnerUrl}/consent/cl_notatoken`, { headers: { origin: APP } });
    expect(page.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("is off unless origins are listed", async () => {
    const res = await preflight(closed.partnerUrl, "/partner/v1/disbursements", APP);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const get = await fetch(`${closed.partnerUrl}/partner/v1/keys`, { headers: { origin: APP } });
    expect(get.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("takes only exact origins in CORS_ALLOWED_ORIGINS", () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ALLOWED_ORIGINS: `${APP}, http://localhost:3000` }).corsOrigins).toEqual([
      APP,
      "http://localhost:3000",
    ]);
    for (const bad of ["*", `${APP}/`, `${APP}/path`, "app.lender.example", "ftp://x.example"])
      expect(() => loadConfig({ CORS_ALLOWED_ORIGINS: bad }), bad).toThrow(ConfigError);
  });
});
