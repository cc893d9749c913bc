import { randomBytes } from "node:crypto";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { ApiError } from "../../src/platform/errors.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import {
  enrol,
  type MemberFixture,
  member,
  portalAdmin,
  productionPasswordCost,
  totpCode,
} from "../support/portal.ts";

// Someone who knows a member's email, guessing: they must be slowed (per account, per client address, on
// every instance), and never able to keep the member out of the portal on a browser the member has signed in
// on (OWASP's device cookies). Two instances on one database, with small buckets so that few password hashes
// are needed: 1 failure per address, 2 per account from unknown browsers, 3 per known browser, each refilled
// far too slowly to matter during the test.
const clock = new ManualClock();
const slow = 0.001;
const portalSignin = {
  address: { capacity: 1, refillPerSecond: slow },
  account: { capacity: 2, refillPerSecond: slow },
  device: { capacity: 3, refillPerSecond: slow },
};
let t: TestApp;
let u: TestApp;
let p: PartnerFixture;
let admin: MemberFixture;

beforeAll(async () => {
  t = await startTestApp({ clock, config: { portalSignin } });
  u = await startAnotherInstance(t, { clock, config: { portalSignin } });
  p = await createPartner(t);
  admin = await member(t, clock, p.partnerId, "admin");
});
afterAll(async () => {
  await u?.stop();
  await t?.stop();
});

/** Loopback addresses (all of 127/8), one per attempt unless a test says otherwise. */
let last = 10;
const freshAddress = () => {
  last += 1;
  return `127.0.${Math.floor(last / 250)}.${(last % 250) + 1}`;
};

interface Answer {
  status: number;
  retryAfter: number;
  /** `portal_device=…` as a browser would send it back, when the answer set it. */
  device: string | undefined;
  setCookies: string[];
}

/** A sign-in from the client address `from` (bound on the socket), with the cookie given, if any. */
function signIn(
  app: TestApp,
  body: { email: string; password: string; code: string },
  o: { from?: string; cookie?: string } = {},
): Promise<Answer> {
  const url = new URL("/portal.v1.PortalAuthService/SignIn", app.partnerUrl);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    origin: url.origin,
    "connect-protocol-version": "1",
  };
  if (o.cookie) headers.cookie = o.cookie;
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: "POST", headers, localAddress: o.from ?? freshAddress(), agent: false },
      (res) => {
        res.resume();
        res.on("end", () => {
          const setCookies = res.headers["set-cookie"] ?? [];
          const device = setCookies.find((c) => c.startsWith("portal_device="))?.split(";")[0];
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: Number(res.headers["retry-after"] ?? 0),
            device,
            setCookies,
          });
        });
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/** The member's right credentials, with a code of the clock's current 30-second step. */
const right = (m: MemberFixture) => ({
  email: m.email,
  password: m.password,
  code: totpCode(m.secret, clock),
});
/** A wrong password. */
const wrong = (email: string) => ({
  email,
  password: `not it ${randomBytes(4).toString("hex")}`,
  code: "123456",
});
/** A TOTP step not used yet (each code signs in once). */
const nextStep = () => clock.advance(31 * ms.second);

/** Six wrong guesses at `email`, each from an address of its own, on both instances: past any budget. */
async function outsiderGuesses(email: string): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < 6; i++) answers.push(await signIn(i % 2 ? u : t, wrong(email)));
  return answers;
}

describe("an outsider guessing a member's password", () => {
  it("is slowed with 429 and Retry-After on every instance, while the member's own browser signs in at once", async () => {
    const victim = await member(t, clock, p.partnerId, "admin");
    // The member signs in on a browser new to the account: it gets a device cookie.
    nextStep();
    const first = await signIn(t, right(victim));
    expect(first.status).toBe(200);
    const device = first.device ?? "";

    // Eight wrong guesses, each from an address of its own, on either instance; then, at the same moment,
    // the member on that browser signs in at once (on the other instance too), and the cookie is issued again.
    nextStep();
    const guesses: Answer[] = [];
    for (let i = 0; i < 8; i++) guesses.push(await signIn(i % 2 ? u : t, wrong(victim.email)));
    const own = await signIn(u, right(victim), { cookie: device });
    expect(own.status).toBe(200);
    expect(own.device).toMatch(/^portal_device=/);

    // The account's two guesses were weighed, the rest refused before any password was hashed.
    expect(guesses.map((g) => g.status)).toEqual([401, 401, 429, 429, 429, 429, 429, 429]);
    for (const g of guesses.slice(2)) expect(g.retryAfter).toBeGreaterThan(60);
    expect(first.setCookies.find((c) => c.startsWith("portal_device="))).toMatch(
      /^portal_device=[A-Za-z0-9_-]+; Path=\/portal\.v1\.PortalAuthService\/SignIn; HttpOnly; SameSite=Strict; Max-Age=15552000$/,
    );
    // A browser new to the account waits like the outsider, and the outsider is still refused.
    nextStep();
    expect((await signIn(t, right(victim))).status).toBe(429);
    expect((await signIn(t, wrong(victim.email))).status).toBe(429);
  });

  it("is slowed per client address, counted once across instances", async () => {
    // Ten addresses, each guessing two emails nobody has, one on each instance: each address's one failure is
    // weighed where it lands, and its second, on the other instance, is refused.
    const addresses = Array.from({ length: 10 }, (_, i) => `127.0.100.${i + 1}`);
    // One address after another: ten hashes at once on a busy machine may outwait the hashing queue (503),
    // which is the hashing limit's test, not this one's.
    const seen: Answer[][] = [];
    for (const [i, from] of addresses.entries()) {
      const one = await signIn(t, wrong(`nobody-${i}-a@example.com`), { from });
      const two = await signIn(u, wrong(`nobody-${i}-b@example.com`), { from });
      seen.push([one, two]);
    }
    expect(seen.map((pair) => pair.map((a) => a.status))).toEqual(addresses.map(() => [401, 429]));
    for (const [, two] of seen) expect(two?.retryAfter).toBeGreaterThanOrEqual(1);
  });

  it("is slowed per client address, an IPv6 /64 counted as one address", async () => {
    // The client's address as the sign-in sees it: an IPv6 address is counted by its /64 (loopback has one
    // IPv6 address only, so the service is called directly), an IPv4-mapped one as its IPv4 address.
    const attempt = async (address: string, email: string) => {
      try {
        await t.app.services.portal.signin.signIn(
          t.app.orm.em.fork(),
          { id: "", email: "", address, userAgent: "" },
          email,
          "not the password",
          "123456",
          undefined,
        );
        return "ok";
      } catch (err) {
        return err instanceof ApiError ? err.code : String(err);
      }
    };
    expect(await attempt("2001:db8:5:6::1", "v6-a@example.com")).toBe("unauthenticated");
    expect(await attempt("2001:db8:5:6:ffff:1:2:3", "v6-b@example.com")).toBe("rate_limited");
    expect(await attempt("2001:db8:5:7::1", "v6-c@example.com")).toBe("unauthenticated");
    expect(await attempt("198.51.100.7", "v4-a@example.com")).toBe("unauthenticated");
    expect(await attempt("::ffff:198.51.100.7", "v4-b@example.com")).toBe("rate_limited");
  });
});

describe("strangers filling the password hashing", () => {
  it("never make a member on their own browser wait behind them", async () => {
    // At the real cost: the point is what a queue of real hashes does to the member.
    using _ = productionPasswordCost();
    const victim = await member(t, clock, p.partnerId, "admin");
    nextStep();
    const device = (await signIn(t, right(victim))).device ?? "";
    // For an email nobody has, the service verifies against a dummy hash it makes at first use (at this cost):
    // made now, so the strangers below queue for the hashing itself, as on a service that has been up a while.
    expect(
      (await signIn(t, wrong(`nobody-first-${randomBytes(3).toString("hex")}@example.com`))).status,
    ).toBe(401);
    // Sixteen guesses at sixteen emails nobody has, each from an address of its own: each within every budget,
    // each a password hash (two run at once, the rest wait their turn).
    let answered = 0;
    const flood = Array.from({ length: 16 }, (_, i) =>
      signIn(t, wrong(`nobody-${i}-${randomBytes(3).toString("hex")}@example.com`)).then((a) => {
        answered += 1;
        return a;
      }),
    );
    // The hashing is busy and its queue full of strangers when the member signs in on their own browser.
    await Promise.race(flood);
    nextStep();
    const own = await signIn(t, right(victim), { cookie: device });
    const answeredBefore = answered;
    expect(own.status).toBe(200);
    // The member went before the strangers still waiting: most of them were answered after.
    expect(answeredBefore, "strangers answered before the member").toBeLessThanOrEqual(8);
    // The strangers are refused as strangers (or, on a machine too busy to hash them all in time, told to retry).
    for (const a of await Promise.all(flood)) expect([401, 503]).toContain(a.status);
  });
});

describe("a device cookie", () => {
  it("gets past the account's budget only for the member it was issued to", async () => {
    const victim = await member(t, clock, p.partnerId, "developer");
    const other = await member(t, clock, p.partnerId, "developer");
    nextStep();
    const guesses = await outsiderGuesses(victim.email);
    expect(guesses.at(-1)?.status).toBe(429);

    const own = victim.browser.device ?? "";
    const value = own.slice(own.indexOf("=") + 1);
    const altered = `portal_device=${value.slice(0, 40)}${value[40] === "A" ? "B" : "A"}${value.slice(41)}`;
    const forged = `portal_device=${randomBytes(120).toString("base64url")}`;
    for (const cookie of [undefined, forged, altered, other.browser.device])
      expect((await signIn(t, right(victim), { cookie })).status, cookie).toBe(429);
    expect((await signIn(t, right(victim), { cookie: own })).status).toBe(200);

    // Bound to the member, not only the email: the person removed and invited again is a new member, whose
    // old browser's cookie no longer counts (a browser that joined as the new member does).
    await admin.browser.client(TeamService).removeMember({ memberId: victim.id });
    const again = await portalAdmin(t).inviteMember({
      partnerId: p.partnerId,
      email: victim.email,
      role: "developer",
    });
    const back = await enrol(t, clock, again.inviteUrl, victim.email);
    nextStep();
    expect((await signIn(t, right(back), { cookie: own })).status).toBe(429);
    expect((await signIn(t, right(back), { cookie: back.browser.device })).status).toBe(200);
  });

  it("still asks for the second factor, and a code signs in once", async () => {
    const victim = await member(t, clock, p.partnerId, "viewer");
    nextStep();
    await outsiderGuesses(victim.email);
    const cookie = victim.browser.device;
    const code = totpCode(victim.secret, clock);
    const wrongCode = String((Number(code) + 500_000) % 1_000_000).padStart(6, "0");
    const password = victim.password;
    expect((await signIn(t, { email: victim.email, password, code: wrongCode }, { cookie })).status).toBe(
      401,
    );
    expect((await signIn(t, { email: victim.email, password, code }, { cookie })).status).toBe(200);
    expect((await signIn(u, { email: victim.email, password, code }, { cookie })).status).toBe(401);
  });

  it("has a budget of its own: a stolen one is held back, not the account", async () => {
    const victim = await member(t, clock, p.partnerId, "developer");
    // A second browser of the member's.
    nextStep();
    const second = (await signIn(t, right(victim))).device;
    // Someone holding the first browser's cookie guesses: its three failures, then that browser waits.
    const stolen = victim.browser.device;
    const guesses: Answer[] = [];
    for (let i = 0; i < 4; i++)
      guesses.push(await signIn(i % 2 ? u : t, wrong(victim.email), { cookie: stolen }));
    expect(guesses.map((g) => g.status)).toEqual([401, 401, 401, 429]);
    expect(guesses[3]?.retryAfter).toBeGreaterThan(60);
    // The account is not locked: the member's other browser, and a browser new to the account, sign in.
    nextStep();
    expect((await signIn(u, right(victim), { cookie: second })).status).toBe(200);
    nextStep();
    expect((await signIn(t, right(victim))).status).toBe(200);
    // The browser whose cookie was used waits out its own Retry-After.
    nextStep();
    expect((await signIn(t, right(victim), { cookie: stolen })).status).toBe(429);
  });
});
