import type net from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADDRESS_LIMITS, createAddressGuard } from "../../src/ratelimit/limiters.service.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectFrom, statusOn } from "../support/raw-http.ts";
import { eventually, settleChangeFeed } from "../support/wait.ts";

// The per-address limit on failed authentications (docs/rate-limits.md) must never refuse a partner who has
// failed nothing: partners' calls share an address behind a NAT or a proxy, come in bursts of hundreds on a new
// instance (whose cache holds no key yet, as after the change feed's reconnect, when every cache is dropped),
// and hold calls open for long (slow bodies, long reads). Each such call took a token on arrival and held it
// until it was answered: 101 calls in flight from one address, and the next call with a key the instance had not
// yet looked up was refused "Too many failed authentications".
let t: TestApp;
let locker: pg.Client;
/** Calls that reached the key check, and those whose key it took. */
let checking = 0;
let authenticated = 0;
beforeAll(async () => {
  t = await startTestApp();
  // The buckets never refill here (a clock that stands still): on the wall clock, what comes back while the
  // calls are sent would depend on how fast this machine answers.
  Object.assign(t.app.services.addressGuard, createAddressGuard({ ...ADDRESS_LIMITS, now: () => 0 }));
  // Counts the keys the service has taken (delegating to its own check), to know held calls were admitted.
  const keys = t.app.services.apiKeys;
  const authenticate = keys.authenticate.bind(keys);
  keys.authenticate = async (...args) => {
    checking++;
    const caller = await authenticate(...args);
    authenticated++;
    return caller;
  };
  locker = new pg.Client({ connectionString: t.databaseUrl });
  await locker.connect();
});
afterAll(async () => {
  await locker?.end();
  await t?.stop();
});

const connect = (localAddress: string) => connectFrom(t.partnerUrl, localAddress);
const get = (s: net.Socket, key: string) =>
  s.write(
    `GET /partner/v1/keys HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer ${key}\r\n\r\n`,
  );

/**
 * Sends `count` calls with `key` from `address` all at once (every connection open first), while the key table
 * is locked, so the key's lookup is held at the database until every call has arrived (taken for its key, or
 * answered already); then lets the lookup go. The answers' statuses.
 */
async function burstWhileLookupHeld(address: string, key: string, count: number): Promise<number[]> {
  const sockets = await Promise.all(Array.from({ length: count }, () => connect(address)));
  let answered = 0;
  const answers = sockets.map((s) =>
    statusOn(s).then((status) => {
      answered++;
      return status;
    }),
  );
  const before = checking;
  await locker.query("begin");
  await locker.query("lock table api_keys in access exclusive mode");
  try {
    for (const s of sockets) get(s, key);
    await eventually(() => checking - before + answered === count, { what: "every call arrived" });
  } finally {
    await locker.query("commit");
  }
  return Promise.all(answers);
}

/** Spends an address's whole budget of failed authentications with distinct guesses. */
async function exhaust(address: string): Promise<void> {
  for (let i = 0; ; i++) {
    const s = await connect(address);
    const answer = statusOn(s);
    get(s, `sk_live_${String(i).padStart(30, "0")}xx`);
    if ((await answer) === 429) return;
  }
}

describe("the per-address limit on failed authentications, for partners", () => {
  it("lets through a burst of calls all at once with a key this instance has not looked up yet", async () => {
    const q = await createPartner(t);
    await settleChangeFeed(t.app);
    expect(t.app.services.apiKeys.knows(`Bearer ${q.sandboxKey}`)).toBe(false);
    // Three times what the address's bucket holds, every connection open before any call is written, and the
    // key's lookup held at the database until every call has arrived.
    const statuses = await burstWhileLookupHeld(
      "127.0.0.11",
      q.sandboxKey,
      ADDRESS_LIMITS.failures.capacity * 3,
    );
    // None taken for a guess; all answered (200, or 503 should the pool be exhausted when the lock goes).
    expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    // A guess from the address is still weighed, and charged: the address's budget is whole.
    const guess = await connect("127.0.0.11");
    const refused = statusOn(guess);
    get(guess, `sk_live_${"g".repeat(32)}`);
    expect(await refused).toBe(401);
  });

  it("gives a call's token back once its key is taken, not when it is answered", async () => {
    // Three partners' keys, known to the instance, each with as many writes held open (headers sent, the body
    // not yet) as its write bucket admits: more calls in flight from one address than its bucket holds.
    const partners = await Promise.all([1, 2, 3].map(() => createPartner(t)));
    const payload = Buffer.from(JSON.stringify({ url: "http://127.0.0.1:9/held", events: ["*"] }));
    const held: net.Socket[] = [];
    const before = authenticated;
    for (const p of partners) {
      for (let i = 0; i < 40; i++) {
        const s = await connect("127.0.0.12");
        s.on("error", () => undefined);
        s.write(
          `POST /partner/v1/webhooks HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${p.sandboxKey}\r\n` +
            `content-type: application/json\r\ncontent-length: ${payload.length}\r\nconnection: close\r\n\r\n`,
        );
        s.write(payload.subarray(0, 10));
        held.push(s);
      }
    }
    await eventually(() => authenticated - before >= held.length, { what: "every held call admitted" });
    expect(held.length).toBeGreaterThan(ADDRESS_LIMITS.failures.capacity);
    try {
      // A fourth partner's first call from the same address, its key not yet known here.
      const r = await createPartner(t);
      await settleChangeFeed(t.app);
      expect(t.app.services.apiKeys.knows(`Bearer ${r.sandboxKey}`)).toBe(false);
      const s = await connect("127.0.0.12");
      const answer = statusOn(s);
      get(s, r.sandboxKey);
      expect(await answer).toBe(200);
    } finally {
      for (const s of held) s.destroy();
    }
  });
  it("answers 429, not 401, to a guess sent many times at once from an address over its budget", async () => {
    await exhaust("127.0.0.13");
    // A tenth of a second's refill: one token, which the burst's first call takes to look the guess up; the others
    // join that lookup (one query), and each is refused as a guess from the address is.
    t.app.services.addressGuard.refund("127.0.0.13");
    const statuses = await burstWhileLookupHeld("127.0.0.13", `sk_live_${"h".repeat(32)}`, 300);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(1);
    expect(statuses.filter((s) => s !== 429 && s !== 401)).toEqual([]);
  });

  it("answers 429 to a revoked key from an address over its budget, and lets through a working key whose cache entry was dropped", async () => {
    const r = await createPartner(t);
    await settleChangeFeed(t.app);
    const once = async (key: string, from = "127.0.0.14") => {
      const s = await connect(from);
      const answer = statusOn(s);
      get(s, key);
      return answer;
    };
    expect(await once(r.sandboxKey)).toBe(200);
    expect(await once(r.liveKey)).toBe(200);
    await t.internal.apiKeys.revokeApiKey({ keyId: r.liveKeyId });
    // The sandbox key is rolled: the change drops its cache entry, and it keeps working for 24 hours.
    await t.internal.apiKeys.rollApiKey({ keyId: r.sandboxKeyId, expiresInHours: 24 });
    await settleChangeFeed(t.app);
    // The revoked key, looked up again from elsewhere: the instance knows it, as revoked.
    expect(await once(r.liveKey, "127.0.0.15")).toBe(401);
    await exhaust("127.0.0.14");
    expect(await once(r.liveKey)).toBe(429);
    expect(await once(r.sandboxKey)).toBe(200);
  });
});
