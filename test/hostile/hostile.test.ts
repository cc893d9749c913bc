import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { eventually } from "../support/wait.ts";

// Hostile input: every case must get a 4xx with the contract's error body, never a 5xx, never another
// tenant's data, and the server must stay up with bounded memory.
let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
const owned: Record<string, string> = {};

const doc = JSON.parse(
  readFileSync(path.resolve(import.meta.dirname, "../../gen/openapi/partner.v1.openapi.json"), "utf8"),
) as { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>> };

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 100_000, refillPerSecond: 100_000 },
        write: { capacity: 100_000, refillPerSecond: 100_000 },
      },
      http: { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, keepAliveTimeoutMs: 5_000 },
    },
  });
  a = await createPartner(t);
  b = await createPartner(t);
  // Partner A's resources, which partner B (and A's own live key) must never reach.
  const hook = await createWebhook(t.partnerUrl, a.sandboxKey, {
    url: "http://127.0.0.1:9/h",
    events: ["*"],
  });
  owned.webhook = hook.id;
  const link = await send("POST", "/partner/v1/consent-links", {
    key: a.sandboxKey,
    body: { phoneNumber: "+2348000000003", scopes: ["standing"], ledgerWindowDays: 30 },
  });
  owned.link = link.json.id;
  const accepted = await send("POST", `/partner/v1/sandbox/consent-links/${owned.link}/accept`, {
    key: a.sandboxKey,
  });
  owned.consent = accepted.json.consentId;
  const test = await send("POST", `/partner/v1/webhooks/${owned.webhook}/test`, {
    key: a.sandboxKey,
    body: {},
  });
  owned.event = test.json.eventId ?? "";
  const dsb = await send("POST", "/partner/v1/disbursements", {
    key: a.sandboxKey,
    headers: { "idempotency-key": "hostile-1" },
    body: {
      userId: "usr_sandboxEmerging",
      principalKobo: "100000",
      destination: "WALLET",
      reference: "hostile-1",
      repaymentSchedule: {
        installments: [
          {
            dueDate: new Date(Date.now() + 20 * 86_400_000).toISOString().slice(0, 10),
            amountKobo: "110000",
          },
        ],
      },
      scheduleAcceptedAt: new Date().toISOString(),
    },
  });
  owned.disbursement = dsb.json.id;
  owned.repayment = `rpy_${String(owned.disbursement).slice(4)}_1`;
  const deliveries = await eventually(async () => {
    const r = await send("GET", `/partner/v1/webhooks/${owned.webhook}/deliveries`, { key: a.sandboxKey });
    return r.json.deliveries?.length ? r.json.deliveries : undefined;
  });
  owned.delivery = deliveries[0].id;
  owned.event ||= deliveries[0].eventId;
});
afterAll(() => t?.stop());

async function send(
  method: string,
  url: string,
  o: { key?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  let body: string | Uint8Array | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers["content-type"] ??= "application/json";
  }
  if (o.raw !== undefined) headers["content-type"] ??= "application/json";
  const res = await fetch(`${t.partnerUrl}${url}`, { method, headers, body: body as BodyInit | undefined });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** The contract's error body with a 4xx. */
function expectClientError(r: { status: number; json: any; text: string }, what: string) {
  expect(r.status, `${what}: ${r.text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
  expect(r.status, `${what}: ${r.text.slice(0, 200)}`).toBeLessThan(500);
  expect(r.json, what).toMatchObject({
    code: expect.stringMatching(/^[a-z_]+$/),
    message: expect.any(String),
    requestId: expect.stringMatching(/^req_/),
  });
}

/** Every operation of the document with its path parameters filled from partner A's resources. */
/** A valid body for the operations that take one. */
const bodyFor = (template: string, verb: string): Record<string, unknown> => {
  if (template.includes("standing")) return { tier: "Trusted", score: 900 };
  if (template.includes("collect")) return { outcome: "SUCCESS" };
  if (template.includes("replay-failed")) return { since: new Date(Date.now() - 3_600_000).toISOString() };
  if (verb === "PATCH") return { description: "changed" };
  return {};
};

function operations(): { verb: string; url: string; template: string; hasBody: boolean }[] {
  const fill: Record<string, string> = {
    "/partner/v1/webhooks/{id}": owned.webhook ?? "",
    "/partner/v1/webhooks/{id}/rotate-secret": owned.webhook ?? "",
    "/partner/v1/webhooks/{id}/test": owned.webhook ?? "",
    "/partner/v1/webhooks/{webhook_id}/deliveries": owned.webhook ?? "",
    "/partner/v1/deliveries/{id}": owned.delivery ?? "",
    "/partner/v1/deliveries/{id}/replay": owned.delivery ?? "",
    "/partner/v1/deliveries/{id}/attempts": owned.delivery ?? "",
    "/partner/v1/webhooks/{id}/stats": owned.webhook ?? "",
    "/partner/v1/webhooks/{id}/replay-failed": owned.webhook ?? "",
    "/partner/v1/events/{id}": owned.event ?? "",
    "/partner/v1/consents/{id}": owned.consent ?? "",
    "/partner/v1/consents/{id}/revoke": owned.consent ?? "",
    "/partner/v1/consent-links/{id}": owned.link ?? "",
    "/partner/v1/sandbox/consent-links/{id}/accept": owned.link ?? "",
    "/partner/v1/sandbox/consent-links/{id}/decline": owned.link ?? "",
    "/partner/v1/sandbox/consents/{id}/revoke": owned.consent ?? "",
    "/partner/v1/disbursements/{id}": owned.disbursement ?? "",
    "/partner/v1/disbursements/{disbursement_id}/repayments": owned.disbursement ?? "",
    "/partner/v1/sandbox/disbursements/{id}/accept": owned.disbursement ?? "",
    "/partner/v1/sandbox/disbursements/{id}/decline": owned.disbursement ?? "",
    "/partner/v1/sandbox/disbursements/{id}/fail": owned.disbursement ?? "",
    "/partner/v1/sandbox/disbursements/{id}/reverse": owned.disbursement ?? "",
    "/partner/v1/sandbox/repayments/{id}/collect": owned.repayment ?? "",
    "/partner/v1/users/{user_id}/consent": "usr_sandboxEmerging",
    "/partner/v1/users/{user_id}/snapshot": "usr_sandboxEmerging",
    "/partner/v1/sandbox/users/{user_id}/standing": "usr_sandboxEmerging",
  };
  return Object.entries(doc.paths).flatMap(([template, verbs]) =>
    Object.entries(verbs).map(([verb, op]) => ({
      verb: verb.toUpperCase(),
      template,
      url: template.replace(/\{[a-z_]+\}/, fill[template] ?? "x"),
      hasBody: Boolean((op as { requestBody?: unknown }).requestBody),
    })),
  );
}

describe("another tenant's ids and the other environment's key", () => {
  it("never reach partner A's resources, on every endpoint", async () => {
    const secretBits = Object.values(owned).filter((v) => v.length > 10);
    for (const op of operations()) {
      if (!op.template.includes("{")) continue;
      // Sandbox users belong to no partner (the fixtures are shared by every sandbox partner, by design).
      if (op.template === "/partner/v1/sandbox/users/{user_id}/standing") continue;
      for (const [who, key] of [
        ["partner B", b.sandboxKey],
        ["A's live key", a.liveKey],
      ] as const) {
        const r = await send(op.verb, op.url, {
          key,
          body: op.hasBody ? bodyFor(op.template, op.verb) : undefined,
        });
        expectClientError(r, `${who} ${op.verb} ${op.url}`);
        expect([403, 404], `${who} ${op.verb} ${op.url}: ${r.text}`).toContain(r.status);
        // Never another tenant's data: the answer names nothing of A's but the id that was asked for.
        for (const bit of secretBits) if (!op.url.includes(bit)) expect(r.text).not.toContain(bit);
      }
    }
    // A's resources are untouched.
    const hook = await send("GET", `/partner/v1/webhooks/${owned.webhook}`, { key: a.sandboxKey });
    expect(hook.json.status).toBe("ACTIVE");
    const consent = await send("GET", `/partner/v1/consents/${owned.consent}`, { key: a.sandboxKey });
    expect(consent.json.status).toBe("ACTIVE");
  });

  it("cannot squat or probe partner A's disbursement references", async () => {
    const create = (key: string, idempotencyKey: string) =>
      send("POST", "/partner/v1/disbursements", {
        key,
        headers: { "idempotency-key": idempotencyKey },
        body: {
          userId: "usr_sandboxEmerging",
          principalKobo: "100000",
          destination: "WALLET",
          reference: "hostile-1",
          repaymentSchedule: {
            installments: [
              {
                dueDate: new Date(Date.now() + 20 * 86_400_000).toISOString().slice(0, 10),
                amountKobo: "110000",
              },
            ],
          },
          scheduleAcceptedAt: new Date().toISOString(),
        },
      });
    // B gets the user's consent as A did.
    const link = await send("POST", "/partner/v1/consent-links", {
      key: b.sandboxKey,
      body: { phoneNumber: "+2348000000003", scopes: ["standing"], ledgerWindowDays: 30 },
    });
    await send("POST", `/partner/v1/sandbox/consent-links/${link.json.id}/accept`, { key: b.sandboxKey });
    // References are per partner: B's "hostile-1" is B's own, and says nothing of A's.
    const theirs = await create(b.sandboxKey, "squat-1");
    expect(theirs.status, theirs.text).toBe(200);
    expect(theirs.json.id).not.toBe(owned.disbursement);
    // A reusing its own reference under a new key is refused, and nothing is written.
    const again = await create(a.sandboxKey, "hostile-again");
    expect(again.status, again.text).toBe(409);
    expect(again.json.code).toBe("conflict");
    const rows = await sql(
      t.app.orm.em.fork(),
      "select partner_id from disbursements where reference = 'hostile-1' order by partner_id",
    );
    expect(rows.map((r) => r.partner_id).sort()).toEqual([a.partnerId, b.partnerId].sort());
  });
});

describe("malformed requests", () => {
  const post = (raw: string | Buffer, headers: Record<string, string> = {}) =>
    send("POST", "/partner/v1/webhooks", { key: a.sandboxKey, raw, headers });

  it("malformed JSON, wrong types, unknown fields and deep nesting: 400/422", async () => {
    const bodies = [
      "{",
      "[]",
      '"text"',
      "null",
      "123",
      '{"url":}',
      "\u0000\u0001",
      '{"url": 5, "events": "all"}',
      '{"url": "https://example.com", "events": [{"a": 1}]}',
      '{"url": "https://example.com", "events": ["*"], "bogus": true}',
      '{"url": ["https://example.com"], "events": ["*"]}',
      `{"url": "https://example.com", "events": ["*"], "description": ${"[".repeat(100_000)}${"]".repeat(100_000)}}`,
      `${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}`,
      '{"url": "https://example.com/\\r\\nX-Injected: 1", "events": ["*"]}',
      '{"url": "https://example.com", "events": ["\' OR 1=1 --"]}',
      '{"__proto__": {"polluted": true}, "url": "https://example.com", "events": ["*"]}',
    ];
    for (const raw of bodies) expectClientError(await post(raw), raw.slice(0, 60));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const disbursement = await send("POST", "/partner/v1/disbursements", {
      key: a.sandboxKey,
      headers: { "idempotency-key": "hostile-types" },
      raw: '{"userId": "usr_sandboxEmerging", "principalKobo": 1.5, "destination": "CASH", "reference": "x"}',
    });
    expectClientError(disbursement, "fractional kobo");
    for (const principal of ['"-1"', '"1e3"', '"99999999999999999999999"', "true", '"0x10"']) {
      const r = await send("POST", "/partner/v1/disbursements", {
        key: a.sandboxKey,
        headers: { "idempotency-key": `hostile-${principal}` },
        raw: `{"userId": "usr_sandboxEmerging", "principalKobo": ${principal}, "destination": "WALLET", "reference": "y"}`,
      });
      expectClientError(r, `principal ${principal}`);
    }
  });

  it("wrong content types: 415", async () => {
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/xml",
    ]) {
      const r = await post('{"url": "https://example.com", "events": ["*"]}', { "content-type": type });
      expectClientError(r, type);
      expect(r.status).toBe(415);
    }
  });

  it("huge bodies: 413; huge headers: 431 with the error body", async () => {
    const big = await post(`{"url": "${"a".repeat(2 * 1024 * 1024)}"}`);
    expectClientError(big, "2 MiB body");
    expect(big.status).toBe(413);
    const headers = await rawRequest(
      `GET /partner/v1/keys HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${a.sandboxKey}\r\nx-big: ${"b".repeat(100_000)}\r\n\r\n`,
    );
    expect(headers).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(headers.split("\r\n\r\n")[1] ?? "")).toMatchObject({ code: "headers_too_large" });
  });

  it("path traversal, SQL metacharacters and header injection in ids and queries: 4xx", async () => {
    const ids = [
      "..%2F..%2Fetc%2Fpasswd",
      "../../etc/passwd",
      "%00",
      "whk_%27%20OR%201%3D1%20--",
      "whk_'; drop table webhooks; --",
      "%0d%0aSet-Cookie:%20x=1",
      "a".repeat(5_000),
      "%ff%fe",
      "whk_01J0000000000000000000000%",
    ];
    for (const id of ids) {
      for (const base of [
        "/partner/v1/webhooks/",
        "/partner/v1/consents/",
        "/partner/v1/disbursements/",
        "/partner/v1/users/",
      ]) {
        const r = await send("GET", `${base}${id}${base.includes("users") ? "/snapshot" : ""}`, {
          key: a.sandboxKey,
        });
        expectClientError(r, `${base}${id}`);
        expect(r.headers.get("set-cookie")).toBeNull();
      }
    }
    for (const q of [
      "limit=-1",
      "limit=abc",
      "limit=1e309",
      "starting_after=%27%20OR%201%3D1",
      "limit=1&limit=2",
      "unknown=1",
    ]) {
      const r = await send("GET", `/partner/v1/webhooks/${owned.webhook}/deliveries?${q}`, {
        key: a.sandboxKey,
      });
      if (r.status === 200) continue; // a harmless value may be accepted
      expectClientError(r, q);
    }
    const snap = await send(
      "GET",
      "/partner/v1/users/usr_sandboxEmerging/snapshot?ledger_window_days=1%20OR%201=1",
      {
        key: a.sandboxKey,
      },
    );
    expectClientError(snap, "window injection");
  });

  it("dot segments, plain or percent-encoded, route as the path they resolve to, never as written", async () => {
    const get = async (target: string) => {
      const text = await rawRequest(
        `GET ${target} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${a.sandboxKey}\r\nconnection: close\r\n\r\n`,
      );
      const body = text.split("\r\n\r\n")[1] ?? "";
      return { status: Number(text.slice(9, 12)), json: JSON.parse(body || "null") };
    };
    const keys = await get("/partner/v1/keys");
    expect(keys.status).toBe(200);
    for (const target of [
      "/partner/v1/webhooks/../keys",
      "/partner/v1/webhooks/%2e%2e/keys",
      "/partner/v1/users/usr_x/%2E%2E/%2e./keys",
      "/partner/v1/./keys",
      "/partner/v1/%2e/keys?",
    ]) {
      const r = await get(target);
      expect(r.status, target).toBe(200);
      expect(r.json, target).toEqual(keys.json);
    }
    // A user id of ".." is not an id: the path resolves to /partner/v1/snapshot, which no route serves.
    for (const target of ["/partner/v1/users/%2e%2e/snapshot", "/partner/v1/users/../snapshot"]) {
      const r = await get(target);
      expect(r.status, target).toBe(404);
      expect(r.json.code, target).toBe("not_found");
    }
    // A query that starts with a second "?" names a parameter "?…", refused as unknown (a proxy that reads it
    // so must not see the service apply it), whichever way the target is read.
    for (const target of [
      "/partner/v1/keys??",
      "/partner/v1/users/usr_sandboxEmerging/snapshot??ledger_window_days=5",
      "/partner/v1/./keys??",
    ]) {
      const r = await get(target);
      expect(r.status, target).toBe(400);
      expect(r.json.code, target).toBe("invalid_argument");
    }
  });

  it("bad credentials in odd shapes: 401", async () => {
    for (const auth of [
      "Bearer",
      "Bearer ",
      "Basic YTpi",
      `Bearer ${a.sandboxKey}x`,
      `bearer ${"k".repeat(10_000)}`,
      "Bearer sk_sandbox_\u00e9",
    ]) {
      const r = await fetch(`${t.partnerUrl}/partner/v1/keys`, { headers: { authorization: auth } }).catch(
        () => undefined,
      );
      if (!r) continue; // fetch refuses some header values itself
      const text = await r.text();
      expectClientError({ status: r.status, json: JSON.parse(text), text }, auth.slice(0, 20));
      expect(r.status).toBe(401);
    }
  });
});

function rawRequest(request: string): Promise<string> {
  const { port } = new URL(t.partnerUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    let data = "";
    socket.on("data", (d) => {
      data += d.toString();
    });
    socket.on("end", () => resolve(data));
    socket.on("close", () => resolve(data));
    socket.on("error", reject);
    socket.write(request);
  });
}

describe("slow and abusive clients", () => {
  it("slow-loris connections are cut off, and others are served meanwhile", async () => {
    const { port } = new URL(t.partnerUrl);
    const sockets: net.Socket[] = [];
    const closed: Promise<void>[] = [];
    for (let i = 0; i < 100; i++) {
      const s = net.connect(Number(port), "127.0.0.1");
      s.on("error", () => undefined);
      s.resume(); // read what the server answers (a 408), so its closing is seen here
      closed.push(new Promise((r) => s.on("close", () => r())));
      // Some send nothing, some the start of an HTTP/2 preface, some half a request line, some headers forever.
      s.write(["", "P", "GET /partner/v1/ke", "GET /partner/v1/keys HTTP/1.1\r\nx-a: 1\r\n"][i % 4] ?? "");
      sockets.push(s);
    }
    const ok = await send("GET", "/partner/v1/keys", { key: a.sandboxKey });
    expect(ok.status).toBe(200);
    await Promise.race([
      Promise.all(closed),
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error("slow connections were not closed")), 15_000),
      ),
    ]);
    for (const s of sockets) s.destroy();
  });

  it("an HTTP/2 preface trickled a byte at a time is cut at the headers time-out from its connection", async () => {
    const { port } = new URL(t.partnerUrl);
    const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    const s = net.connect(Number(port), "127.0.0.1");
    s.on("error", () => undefined);
    s.resume(); // read what the server sends, so its closing is seen here
    const closed = new Promise((r) => s.on("close", r));
    // A byte every 300 ms, each well inside the 1 s headers time-out: only a deadline counted from the
    // connection cuts it before the preface is whole (7.2 s).
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent < preface.length) s.write(preface.subarray(sent, ++sent));
    }, 300);
    await closed;
    clearInterval(trickle);
    expect(sent).toBeLessThan(preface.length);
  });

  it("the server is still up and its memory bounded after all of this", async () => {
    const before = process.memoryUsage().heapUsed;
    for (let round = 0; round < 200; round++) {
      await send("POST", "/partner/v1/webhooks", {
        key: a.sandboxKey,
        raw: `{"url": "${"x".repeat(500_000)}"}`,
      });
    }
    globalThis.gc?.();
    const after = process.memoryUsage().heapUsed;
    expect(after - before).toBeLessThan(200 * 1024 * 1024);
    expect((await send("GET", "/healthz")).status).toBe(200);
    expect((await send("GET", "/partner/v1/keys", { key: a.sandboxKey })).status).toBe(200);
    // A hundred megabytes sent and refused, one request after another: a deadline of its own, for a busy machine.
  }, 120_000);
});

describe("the Connect and gRPC faces", () => {
  const procedure = "/partner.v1.WebhookService/CreateWebhook";

  it("answer undecodable bodies with invalid_request and the contract's ErrorInfo, never internal", async () => {
    for (const [raw, type] of [
      ["{", "application/json"],
      ['{"url": 5}', "application/json"],
      ["\u0000\u0001\u00ff\u00ff", "application/proto"],
      [Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), "application/proto"],
    ] as const) {
      const res = await fetch(`${t.partnerUrl}${procedure}`, {
        method: "POST",
        headers: { authorization: `Bearer ${a.sandboxKey}`, "content-type": type },
        body: raw as BodyInit,
      });
      const text = await res.text();
      expect(res.status, `${type} ${String(raw)}: ${text}`).toBe(400);
      const body = JSON.parse(text);
      expect(body.code).toBe("invalid_argument");
      expect(body.details?.[0], text).toMatchObject({
        type: "google.rpc.ErrorInfo",
        debug: { reason: "invalid_request" },
      });
    }
  });

  it("answer a Connect GET whose message is not base64 with invalid_request, with a key or without", async () => {
    for (const message of ["a", "ab!", "%25%25", "====a"])
      for (const headers of [{ authorization: `Bearer ${a.sandboxKey}` }, {}] as Record<string, string>[]) {
        const res = await fetch(
          `${t.partnerUrl}/partner.v1.KeysService/ListKeys?encoding=json&base64=1&message=${message}`,
          { headers },
        );
        const text = await res.text();
        expect(res.status, `${message}: ${text}`).toBe(400);
        const body = JSON.parse(text);
        expect(body.code).toBe("invalid_argument");
        expect(body.details?.[0], text).toMatchObject({ debug: { reason: "invalid_request" } });
      }
    // The same call, well formed, is served.
    const ok = await fetch(
      `${t.partnerUrl}/partner.v1.KeysService/ListKeys?encoding=json&base64=1&message=${Buffer.from("{}").toString("base64url")}`,
      { headers: { authorization: `Bearer ${a.sandboxKey}` } },
    );
    expect(ok.status).toBe(200);
  });

  it("gRPC: a frame that is not a message is status 3 (INVALID_ARGUMENT), not 13", async () => {
    const http2 = await import("node:http2");
    const session = http2.connect(t.partnerUrl);
    try {
      const garbage = Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]);
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, garbage.length]), garbage]);
      const stream = session.request({
        ":method": "POST",
        ":path": procedure,
        "content-type": "application/grpc",
        te: "trailers",
        authorization: `Bearer ${a.sandboxKey}`,
      });
      const trailers = await new Promise<Record<string, unknown>>((resolve, reject) => {
        let headers: Record<string, unknown> = {};
        stream.on("response", (h) => {
          headers = h;
        });
        stream.on("trailers", (tr) => resolve(tr));
        stream.on("end", () => resolve(headers));
        stream.on("error", reject);
        stream.resume();
        stream.end(frame);
      });
      expect(trailers["grpc-status"]).toBe("3");
    } finally {
      session.close();
    }
  });
});

describe("HTTP/2 requests with made-up methods", () => {
  it("are refused 405 before any handler, and add no series to /metrics", async () => {
    const scrape = async () =>
      (
        await fetch(`${t.internalUrl}/metrics`, { headers: { authorization: `Bearer ${t.internalToken}` } })
      ).text();
    const http2 = await import("node:http2");
    const send = (session: import("node:http2").ClientHttp2Session, method: string, path: string) =>
      new Promise<number>((resolve, reject) => {
        const stream = session.request({ ":method": method, ":path": path });
        stream.on("response", (h) => resolve(Number(h[":status"])));
        stream.on("error", reject);
        stream.resume();
        stream.end();
      });
    const session = http2.connect(t.partnerUrl);
    try {
      // One of each first, so every series this test may touch exists before the count.
      expect(await send(session, "BREW", "/healthz")).toBe(405);
      expect(await send(session, "GET", "/healthz")).toBe(200);
      expect(await send(session, "BREW", "/partner/v1/keys")).toBe(405);
      await scrape(); // the scrape's own request is counted once it is answered
      // The request series only: jobs and deliveries of earlier tests may still add series of their own.
      const series = (text: string) => text.split("\n").filter((l) => l.startsWith("http_request")).length;
      const before = series(await scrape());
      const statuses = await Promise.all(
        Array.from({ length: 500 }, (_, i) =>
          send(session, `M${i.toString(36).toUpperCase()}X`, i % 2 ? "/healthz" : `/partner/v1/keys`),
        ),
      );
      expect(new Set(statuses)).toEqual(new Set([405]));
      const after = await scrape();
      expect(series(after)).toBe(before);
      expect(after).not.toMatch(/method="M\w+X"/);
    } finally {
      session.close();
    }
  });
});

describe("an HTTP/2 request body trickled a byte at a time", () => {
  it("is cut at the request deadline with 408, and the connection keeps serving other streams", async () => {
    const http2 = await import("node:http2");
    const session = http2.connect(t.partnerUrl);
    try {
      const started = performance.now();
      const stream = session.request({
        ":method": "POST",
        ":path": "/partner/v1/webhooks",
        "content-type": "application/json",
        authorization: `Bearer ${a.sandboxKey}`,
      });
      const status = new Promise<number>((resolve) =>
        stream.on("response", (h) => resolve(Number(h[":status"]))),
      );
      const closed = new Promise<void>((resolve) => stream.on("close", () => resolve()));
      stream.on("error", () => undefined); // the server cancels the stream after its answer
      stream.resume();
      stream.write("{");
      const trickle = setInterval(() => {
        if (!stream.closed) stream.write(" ");
      }, 500);
      try {
        expect(await status).toBe(408);
        await closed;
      } finally {
        clearInterval(trickle);
      }
      // The deadline is 2 s here: the stream was not held for the 10 s its sender would have taken.
      expect(performance.now() - started).toBeLessThan(8_000);
      const other = session.request({ ":method": "GET", ":path": "/healthz" });
      other.resume();
      expect(
        await new Promise<number>((resolve) => other.on("response", (h) => resolve(Number(h[":status"])))),
      ).toBe(200);
    } finally {
      session.close();
    }
  });
});

describe("a Host header that is not a host", () => {
  /** One raw HTTP/1.1 request (fetch would refuse to send such a Host), answered or not. */
  const raw = (base: string, path: string, host: string) =>
    new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(base);
      const socket = net.connect(Number(port), hostname, () => {
        socket.end(
          `POST ${path} HTTP/1.1\r\nHost: ${host}\r\ncontent-type: application/json\r\nconnect-protocol-version: 1\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
        );
      });
      let text = "";
      socket.on("data", (d) => {
        text += String(d);
      });
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });

  it("is answered 400 on every Connect path of both listeners, and the service keeps serving", async () => {
    const cases: [string, string][] = [
      [t.partnerUrl, "/partner.v1.KeysService/ListKeys"],
      [t.partnerUrl, "/portal.v1.PortalAuthService/WhoAmI"],
      [t.partnerUrl, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"],
      [t.internalUrl, "/internal.v1.PartnerService/ListPartners"],
    ];
    for (const [base, path] of cases)
      for (const host of ["a b", "", "[", "x:y:z", "127.0.0.1:1, https://evil.example"]) {
        const answer = await raw(base, path, host);
        expect(answer, `${path} with Host: ${host}`).toMatch(/^HTTP\/1\.1 400 /);
      }
    expect((await fetch(`${t.partnerUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${t.internalUrl}/healthz`)).status).toBe(200);
  });
});
