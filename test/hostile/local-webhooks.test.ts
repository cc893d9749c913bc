import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import type { ResolvedAddress } from "../../src/webhooks/destination.ts";
import { createDnsResolver } from "../../src/webhooks/dns.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually, settleChangeFeed } from "../support/wait.ts";

// ALLOW_LOCAL_WEBHOOKS is for a developer's laptop: with it (as the tests run), sandbox subscriptions may use
// http and loopback, but a production subscription is held to https on a public address, and no subscription
// reaches the service's own listeners on loopback (the internal API, /metrics) to read the answers back
// through the deliveries API. Without it, no loopback destination at all. Refusals say "not allowed" or
// "does not resolve", never what a name resolved to.

// A public name the tests control (other names: the service's own resolver, for `localhost`).
const dns = createDnsResolver({ servers: [], timeoutMs: 2_000 });
const resolver = async (host: string): Promise<ResolvedAddress[]> =>
  host === "public.example" ? [{ address: "93.184.216.34", family: 4 }] : dns(host);

let on: TestApp;
let off: TestApp;
let p: PartnerFixture;
let q: PartnerFixture;
let receiver: TestReceiver;

beforeAll(async () => {
  on = await startTestApp({ resolver });
  off = await startTestApp({ config: { allowLocalWebhooks: false } });
  p = await createPartner(on);
  q = await createPartner(off);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await on?.stop();
  await off?.stop();
});

const create = (t: TestApp, key: string, url: string) =>
  rest(t.partnerUrl, "POST", "/partner/v1/webhooks", { key, body: { url, events: ["*"] } });

/** A 422 `validation_failed` whose `url` message says `pattern`. */
function expectRefused(res: { status: number; body: any }, pattern: RegExp, what: string) {
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(422);
  expect(res.body.code, what).toBe("validation_failed");
  expect(res.body.details.fields.url, what).toMatch(pattern);
}

describe("local webhook destinations, switched on", () => {
  it("never reach the service's own listeners, by any loopback spelling, at create or update", async () => {
    const ports = [new URL(on.partnerUrl).port, new URL(on.internalUrl).port];
    for (const port of ports) {
      for (const host of ["127.0.0.1", "127.1.2.3", "[::1]", "[::ffff:7f00:1]", "localhost"]) {
        const res = await create(on, p.sandboxKey, `http://${host}:${port}/metrics`);
        expectRefused(res, /not allowed/, `${host}:${port}`);
        // What a name resolved to is never said.
        if (host === "localhost") expect(JSON.stringify(res.body)).not.toMatch(/127\.|::1/);
      }
    }
    // An IPv6 address with a dotted IPv4 tail is refused for its form before its address is looked at.
    expectRefused(
      await create(on, p.sandboxKey, `http://[::ffff:127.0.0.1]:${ports[0]}/metrics`),
      /https URL/,
      "[::ffff:127.0.0.1]",
    );
    // Nor the database's port, when it is on loopback (the tests' PostgreSQL is).
    const db = new URL(on.databaseUrl);
    expectRefused(
      await create(on, p.sandboxKey, `http://127.0.0.1:${db.port}/`),
      /not allowed/,
      "the database's port",
    );
    // Another local port (a developer's own receiver) is what the switch is for; moving it onto a listener is
    // refused like creating it there.
    const hook = await create(on, p.sandboxKey, receiver.url);
    expect(hook.status).toBe(200);
    const moved = await rest(on.partnerUrl, "PATCH", `/partner/v1/webhooks/${hook.body.id}`, {
      key: p.sandboxKey,
      body: { url: `http://127.0.0.1:${new URL(on.internalUrl).port}/metrics` },
    });
    expectRefused(moved, /not allowed/, "update onto the internal listener");
  });

  it("never reach a sibling instance's listeners on the same database, at create or at delivery", async () => {
    const sibling = await startAnotherInstance(on);
    // The sibling announced its ports on the change feed; `on` has heard it once the feed is settled.
    await settleChangeFeed(on.app);
    try {
      const internal = `http://127.0.0.1:${new URL(sibling.internalUrl).port}/metrics`;
      for (const url of [internal, `http://localhost:${new URL(sibling.partnerUrl).port}/partner/v1/keys`]) {
        expectRefused(await create(on, p.sandboxKey, url), /listener of this service/, url);
      }
      // A subscription moved onto the sibling's internal API behind the API's back sends it nothing.
      const hook = await create(on, p.sandboxKey, receiver.url);
      await sql(on.app.orm.em.fork(), "update webhooks set url = $1 where id = $2", [internal, hook.body.id]);
      await rest(on.partnerUrl, "POST", `/partner/v1/webhooks/${hook.body.id}/test`, {
        key: p.sandboxKey,
        body: {},
      });
      const delivery = await eventually(async () => {
        const list = await rest(on.partnerUrl, "GET", `/partner/v1/webhooks/${hook.body.id}/deliveries`, {
          key: p.sandboxKey,
        });
        const d = list.body.deliveries?.[0];
        return d?.attempt > 0 ? d : undefined;
      });
      expect(delivery).toMatchObject({ lastError: "destination_not_allowed", lastStatusCode: 0 });
    } finally {
      await sibling.stop();
    }
    // A stopped instance's ports are free again (a developer's receiver may take one).
    const freed = await sql<{ n: number }>(
      on.app.orm.em.fork(),
      "select count(*)::int as n from instance_listeners where port = $1",
      [Number(new URL(on.internalUrl).port)],
    );
    expect(freed[0]?.n).toBe(1);
  });

  it("are for sandbox subscriptions only: production ones are refused loopback, private and http", async () => {
    for (const url of [
      receiver.url,
      "http://localhost:9/hooks",
      "https://127.0.0.1/hooks",
      "https://[::1]/hooks",
      "https://10.0.0.1/hooks",
      "https://192.168.1.1/hooks",
    ]) {
      const res = await create(on, p.liveKey, url);
      expectRefused(res, /not allowed|https/, `production ${url}`);
    }
    // `localhost` is named as given, not as what it resolved to.
    const named = await create(on, p.liveKey, "https://localhost/hooks");
    expectRefused(named, /^localhost is not a public address, so it is not allowed$/, "production localhost");
    // A public https destination is what production takes; moving it onto loopback is refused too.
    const hook = await create(on, p.liveKey, "https://public.example/hooks");
    expect(hook.status).toBe(200);
    const moved = await rest(on.partnerUrl, "PATCH", `/partner/v1/webhooks/${hook.body.id}`, {
      key: p.liveKey,
      body: { url: receiver.url },
    });
    expectRefused(moved, /not allowed|https/, "production update onto loopback");
  });

  it("are checked again at delivery: a subscription on a listener's port gets no request sent", async () => {
    // A subscription created before the rule (or written behind the API's back) now points at the internal
    // listener: its delivery fails with destination_not_allowed, and nothing is sent there.
    const hook = await create(on, p.sandboxKey, receiver.url);
    expect(hook.status).toBe(200);
    const internal = `http://127.0.0.1:${new URL(on.internalUrl).port}/metrics`;
    await sql(on.app.orm.em.fork(), "update webhooks set url = $1 where id = $2", [internal, hook.body.id]);
    const sent = await rest(on.partnerUrl, "POST", `/partner/v1/webhooks/${hook.body.id}/test`, {
      key: p.sandboxKey,
      body: {},
    });
    expect(sent.status).toBe(200);
    const delivery = await eventually(async () => {
      const list = await rest(on.partnerUrl, "GET", `/partner/v1/webhooks/${hook.body.id}/deliveries`, {
        key: p.sandboxKey,
      });
      const d = list.body.deliveries?.[0];
      return d?.attempt > 0 ? d : undefined;
    });
    expect(delivery).toMatchObject({ lastError: "destination_not_allowed", lastStatusCode: 0 });
  });
  it("are checked again at delivery for the subscription's environment: production never reaches loopback", async () => {
    // A production subscription moved onto loopback behind the API's back: with the switch on, its attempt is
    // still refused (the switch is for sandbox), and the receiver hears nothing.
    const hook = await create(on, p.liveKey, "https://public.example/hooks");
    expect(hook.status).toBe(200);
    await sql(on.app.orm.em.fork(), "update webhooks set url = $1 where id = $2", [
      receiver.url,
      hook.body.id,
    ]);
    const before = receiver.received.length;
    const sent = await rest(on.partnerUrl, "POST", `/partner/v1/webhooks/${hook.body.id}/test`, {
      key: p.liveKey,
      body: {},
    });
    expect(sent.status).toBe(200);
    const delivery = await eventually(async () => {
      const list = await rest(on.partnerUrl, "GET", `/partner/v1/webhooks/${hook.body.id}/deliveries`, {
        key: p.liveKey,
      });
      const d = list.body.deliveries?.[0];
      return d?.attempt > 0 ? d : undefined;
    });
    expect(delivery).toMatchObject({ lastError: "destination_not_allowed", lastStatusCode: 0 });
    expect(receiver.received.length).toBe(before);
  });
});

describe("local webhook destinations, switched off", () => {
  it("are refused, which nothing implies", async () => {
    for (const url of [
      "http://127.0.0.1:9/hooks",
      "https://127.0.0.1/hooks",
      "https://[::1]/hooks",
      "https://localhost/hooks",
    ]) {
      const res = await create(off, q.sandboxKey, url);
      expectRefused(res, /not allowed|https|does not resolve/, url);
    }
  });
});
