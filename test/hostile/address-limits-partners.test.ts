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

describe("the per-address limit on failed authentications, for partners", () => {
  it("lets through a burst of calls all at once with a key this instance has not looked up yet", async () => {
    const q = await createPartner(t);
    await settleChangeFeed(t.app);
    expect(t.app.services.apiKeys.knows(`Bearer ${q.sandboxKey}`)).toBe(false);
    // Three times what the address's bucket holds, every connection open before any call is written, and the
    // key's lookup held at the database (its table locked) until every call has arrived: each is either
    // refused or waiting for its key.
    const burst = ADDRESS_LIMITS.failures.capacity * 3;
    const sockets = await Promise.all(Array.from({ length: burst }, () => connect("127.0.0.11")));
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
      for (const s of sockets) get(s, q.sandboxKey);
      await eventually(() => checking - before + answered === burst, { what: "every call arrived" });
    } finally {
      await locker.query("commit");
    }
    const statuses = await Promise.all(answers);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
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
});
