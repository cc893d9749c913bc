import http2 from "node:http2";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { member } from "../support/portal.ts";
import { eventually } from "../support/wait.ts";

// On REST the key is checked when the headers arrive, so a bad key costs no body. Whoever holds a leaked key
// may send the headers of a write, hold the body back, and finish it once the key has been revoked or rolled
// with no overlap: the write must then be refused, on HTTP/1.1 and HTTP/2 alike, and nothing written. The same
// for a portal session signed out meanwhile.
let t: TestApp;
let authentications = 0;
let sessionAdmissions = 0;
beforeAll(async () => {
  t = await startTestApp();
  // Counts the service's own key and session checks (delegating to them), to know the held request has
  // been admitted.
  const keys = t.app.services.apiKeys;
  const authenticate = keys.authenticate.bind(keys);
  keys.authenticate = (...args) => {
    authentications++;
    return authenticate(...args);
  };
  const gate = t.app.services.portal.gate;
  const admit = gate.admit.bind(gate);
  gate.admit = (...args) => {
    sessionAdmissions++;
    return admit(...args);
  };
});
afterAll(() => t?.stop());

const body = (url: string) => JSON.stringify({ url, events: ["*"] });

/**
 * Sends a webhook create's headers (with `headers`) and part of its body over HTTP/1.1; `finish` sends the rest
 * and reads the answer.
 */
function heldOverHttp1(headers: Record<string, string>): {
  finish: () => Promise<{ status: number; body: { code?: string } }>;
} {
  const url = new URL(t.partnerUrl);
  const payload = Buffer.from(body("http://127.0.0.1:9/held-h1"));
  const socket = net.connect(Number(url.port), url.hostname);
  socket.write(
    `POST /partner/v1/webhooks HTTP/1.1\r\nHost: ${url.host}\r\n` +
      Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join("") +
      `Content-Type: application/json\r\nContent-Length: ${payload.length}\r\nConnection: close\r\n\r\n`,
  );
  socket.write(payload.subarray(0, 10));
  const answer = new Promise<string>((resolve, reject) => {
    let text = "";
    socket.on("data", (d) => {
      text += d.toString("utf8");
    });
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
  return {
    finish: async () => {
      socket.write(payload.subarray(10));
      const text = await answer;
      const status = Number(text.split(" ")[1]);
      return { status, body: JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) };
    },
  };
}

/** The same over an HTTP/2 stream. */
function heldOverHttp2(headers: Record<string, string>): {
  finish: () => Promise<{ status: number; body: { code?: string } }>;
} {
  const payload = Buffer.from(body("http://127.0.0.1:9/held-h2"));
  const session = http2.connect(t.partnerUrl);
  session.on("error", () => undefined);
  const stream = session.request({
    ":method": "POST",
    ":path": "/partner/v1/webhooks",
    ...headers,
    "content-type": "application/json",
  });
  stream.write(payload.subarray(0, 10));
  const answer = new Promise<{ status: number; body: { code?: string } }>((resolve, reject) => {
    let status = 0;
    let text = "";
    stream.on("response", (h) => {
      status = Number(h[":status"]);
    });
    stream.on("data", (d: Buffer) => {
      text += d.toString("utf8");
    });
    stream.on("end", () => resolve({ status, body: JSON.parse(text) }));
    stream.on("error", reject);
  });
  return {
    finish: async () => {
      stream.end(payload.subarray(10));
      try {
        return await answer;
      } finally {
        session.close();
      }
    },
  };
}

describe("a REST write whose body arrives after its key changed", () => {
  for (const [protocol, hold] of [
    ["HTTP/1.1", heldOverHttp1],
    ["HTTP/2", heldOverHttp2],
  ] as const) {
    it(`is refused once the key is revoked, over ${protocol}, and writes nothing`, async () => {
      const p = await createPartner(t);
      const before = authentications;
      const held = hold({ authorization: `Bearer ${p.sandboxKey}` });
      // The headers have been admitted: the key was checked and found good.
      await eventually(() => authentications > before, { what: "the held request's admission" });
      await t.internal.apiKeys.revokeApiKey({ keyId: p.sandboxKeyId });
      const res = await held.finish();
      expect(res.status).toBe(401);
      expect(res.body.code).toBe("api_key_revoked");
      const issued = await t.internal.apiKeys.issueApiKey({ partnerId: p.partnerId, environment: "sandbox" });
      const hooks = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: issued.key });
      expect(hooks.status).toBe(200);
      expect(hooks.body).toEqual([]);
    });

    it(`is refused once the key is rolled with no overlap, over ${protocol}, and writes nothing`, async () => {
      const p = await createPartner(t);
      const before = authentications;
      const held = hold({ authorization: `Bearer ${p.sandboxKey}` });
      await eventually(() => authentications > before, { what: "the held request's admission" });
      const rolled = await t.internal.apiKeys.rollApiKey({ keyId: p.sandboxKeyId, expiresInHours: 0 });
      const res = await held.finish();
      expect(res.status).toBe(401);
      expect(res.body.code).toBe("api_key_expired");
      const hooks = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: rolled.key });
      expect(hooks.status).toBe(200);
      expect(hooks.body).toEqual([]);
    });
  }

  it("is refused once the portal session that sent it has signed out, and writes nothing", async () => {
    const p = await createPartner(t);
    const dev = await member(t, systemClock, p.partnerId, "developer");
    const before = sessionAdmissions;
    // A session on REST needs what a portal page sends (docs/portal.md): the cookie, the origin, the
    // environment and Connect's protocol header.
    const held = heldOverHttp1({
      cookie: dev.browser.cookie ?? "",
      origin: t.partnerUrl,
      "x-portal-environment": "sandbox",
      "connect-protocol-version": "1",
    });
    await eventually(() => sessionAdmissions > before, { what: "the held request's admission" });
    await dev.browser.client(PortalAuthService).signOut({});
    const res = await held.finish();
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("unauthenticated");
    const hooks = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey });
    expect(hooks.body).toEqual([]);
  });
});
