import dgram from "node:dgram";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { loadConfig } from "../../src/config.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { browser, type MemberFixture, member, totpCode } from "../support/portal.ts";
import { eventually } from "../support/wait.ts";

// A sandbox partner keeps webhook creates in flight (with Idempotency-Key, as the SDK sends) to names whose
// name server never answers. The lookups run before any transaction and end at their deadline, so they hold
// no pooled connection (the test app's pool is 5): another partner's reads and a portal sign-in are served as
// usual meanwhile, and every create is answered 422, naming the URL, within its deadline.

/** A DNS server that reads every query and answers none; it remembers which names were asked. */
async function silentDnsServer() {
  const socket = dgram.createSocket("udp4");
  const asked = new Set<string>();
  socket.on("message", (msg) => {
    // The question's name: length-prefixed labels from byte 12.
    const labels: string[] = [];
    let at = 12;
    while (at < msg.length && (msg[at] ?? 0) > 0) {
      const len = msg[at] ?? 0;
      labels.push(msg.subarray(at + 1, at + 1 + len).toString("latin1"));
      at += len + 1;
    }
    asked.add(labels.join(".").toLowerCase());
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return {
    port: socket.address().port,
    asked,
    close: () => new Promise<void>((r) => socket.close(() => r())),
  };
}

const DNS_TIMEOUT_MS = 3_000;
const clock = new ManualClock();
let dns: Awaited<ReturnType<typeof silentDnsServer>>;
let t: TestApp;
let attacker: PartnerFixture;
let other: PartnerFixture;
let admin: MemberFixture;

beforeAll(async () => {
  dns = await silentDnsServer();
  t = await startTestApp({
    clock,
    config: {
      webhooks: {
        ...loadConfig({}).webhooks,
        dnsServers: [`127.0.0.1:${dns.port}`],
        dnsTimeoutMs: DNS_TIMEOUT_MS,
      },
    },
  });
  attacker = await createPartner(t);
  other = await createPartner(t);
  admin = await member(t, clock, other.partnerId, "admin");
});
afterAll(async () => {
  await t?.stop();
  await dns?.close();
});

describe("webhook creates to names whose DNS never answers", () => {
  it("hold no database connection: other partners are served meanwhile, and each create ends at its deadline", async () => {
    const creates = Array.from({ length: 30 }, async (_, i) => {
      const started = performance.now();
      const res = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
        key: attacker.sandboxKey,
        headers: { "idempotency-key": `silent-${i}` },
        body: { url: `https://hook-${i}.tarpit.example/events`, events: ["*"] },
      });
      return { res, took: performance.now() - started };
    });
    // Enough creates wait on their lookups to hold every pooled connection (5), were lookups to hold them.
    await eventually(() => dns.asked.size >= 5, { what: "5 names asked" });

    const reads = await Promise.all(
      Array.from({ length: 20 }, () =>
        rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: other.sandboxKey }),
      ),
    );
    expect(reads.map((r) => r.status)).toEqual(reads.map(() => 200));
    clock.advance(31 * ms.second);
    const signedIn = await browser(t.partnerUrl)
      .client(PortalAuthService)
      .signIn({ email: admin.email, password: admin.password, code: totpCode(admin.secret, clock) });
    expect(signedIn.member?.id).toBe(admin.id);

    const answered = await Promise.all(creates);
    expect(dns.asked.size).toBeGreaterThanOrEqual(30);
    for (const { res, took } of answered) {
      expect(res.status).toBe(422);
      expect(res.body.code).toBe("validation_failed");
      expect(res.body.details.fields.url).toMatch(/did not resolve in time/);
      // The deadline, plus what a loaded machine adds; never the minutes a system resolver may take.
      expect(took).toBeLessThan(DNS_TIMEOUT_MS + 8_000);
    }
    expect(
      (await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: attacker.sandboxKey })).body,
    ).toEqual([]);
  });

  it("answers a retry whose first answer was stored from the record, without asking DNS again", async () => {
    const body = { url: "http://127.0.0.1:9/ok", events: ["*"] };
    const headers = { "idempotency-key": "stored-then-retried" };
    const first = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: attacker.sandboxKey,
      headers,
      body,
    });
    expect(first.status).toBe(200);
    const asked = dns.asked.size;
    const again = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: attacker.sandboxKey,
      headers,
      body,
    });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(first.body.id);
    // The same key with another body is still refused as a reuse, before any lookup.
    const reused = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: attacker.sandboxKey,
      headers,
      body: { url: "https://reused.tarpit.example/x", events: ["*"] },
    });
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe("idempotency_key_reused");
    expect(dns.asked.size).toBe(asked);
  });
});
