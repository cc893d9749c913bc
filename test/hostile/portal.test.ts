import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { defaultPortalSigninLimits } from "../../src/config.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { browser, type MemberFixture, member, portalAdmin, tokenOf, totpCode } from "../support/portal.ts";

// The portal's people against someone trying: other partners' data, forged requests, reused tokens, guessed
// passwords, API keys where people belong, removed members, and secrets leaking into logs.
const clock = new ManualClock();
const logs: string[] = [];
let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
let adminA: MemberFixture;
let adminB: MemberFixture;

const code = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
};

/** A raw Connect JSON call, headers as given. */
const raw = (path: string, headers: Record<string, string>, body: unknown = {}) =>
  fetch(`${t.partnerUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  t = await startTestApp({ clock, onLog: (line) => logs.push(line) });
  a = await createPartner(t);
  b = await createPartner(t);
  adminA = await member(t, clock, a.partnerId, "admin");
  adminB = await member(t, clock, b.partnerId, "admin");
});
afterAll(() => t?.stop());

describe("a portal session", () => {
  it("of partner A never reaches partner B's data", async () => {
    const { webhook } = await adminA.browser
      .client(WebhookService)
      .createWebhook({ url: "http://127.0.0.1:9/a", events: ["*"] });
    const id = webhook?.id ?? "";
    const seenByB = await adminB.browser.client(WebhookService).listWebhooks({});
    expect(seenByB.webhooks.map((w) => w.id)).not.toContain(id);
    expect(await code(adminB.browser.client(WebhookService).getWebhook({ id }))).toBe("NotFound");
    expect(await code(adminB.browser.client(TeamService).removeMember({ memberId: adminA.id }))).toBe(
      "NotFound",
    );
    const membersB = await adminB.browser.client(TeamService).listMembers({});
    expect(membersB.members.map((m) => m.partnerId)).toEqual([b.partnerId]);
    const auditB = await adminB.browser.client(TeamService).listAuditEvents({ limit: 100 });
    expect(auditB.events.every((e) => e.partnerId === b.partnerId)).toBe(true);
  });

  it("is refused without the service's Origin or without Connect's protocol header", async () => {
    const cookie = adminA.browser.cookie ?? "";
    const base = { cookie, "x-portal-environment": "sandbox", "connect-protocol-version": "1" };
    const ok = await raw("/partner.v1.KeysService/ListKeys", { ...base, origin: t.partnerUrl });
    expect(ok.status).toBe(200);
    const forged: Record<string, string>[] = [
      { ...base },
      { ...base, origin: "https://evil.example" },
      { ...base, origin: "null" },
      { cookie, "x-portal-environment": "sandbox", origin: t.partnerUrl },
      // Not quite the origin: a path, a trailing slash, upper case, a padded port.
      { ...base, origin: `${t.partnerUrl}/x` },
      { ...base, origin: `${t.partnerUrl}/` },
      { ...base, origin: t.partnerUrl.toUpperCase() },
      { ...base, origin: t.partnerUrl.replace(/:(\d+)$/, ":0$1") },
    ];
    for (const headers of forged) {
      const res = await raw("/partner.v1.KeysService/ListKeys", headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
      const who = await raw("/portal.v1.PortalAuthService/WhoAmI", headers);
      expect(who.status, JSON.stringify(headers)).toBe(403);
    }
  });

  it("stops at once when its member is removed", async () => {
    const dev = await member(t, clock, a.partnerId, "developer");
    expect(await code(dev.browser.client(KeysService).listKeys({}))).toBe("ok");
    await adminA.browser.client(TeamService).removeMember({ memberId: dev.id });
    expect(await code(dev.browser.client(KeysService).listKeys({}))).toBe("Unauthenticated");
    expect(await code(dev.browser.client(PortalAuthService).whoAmI({}))).toBe("Unauthenticated");
    clock.advance(31 * ms.second);
    const again = browser(t.partnerUrl).client(PortalAuthService);
    expect(
      await code(
        again.signIn({ email: dev.email, password: dev.password, code: totpCode(dev.secret, clock) }),
      ),
    ).toBe("Unauthenticated");
  });
});

describe("API keys", () => {
  it("can never call the portal's team or sign-in services", async () => {
    for (const key of [a.sandboxKey, a.liveKey]) {
      const headers = {
        authorization: `Bearer ${key}`,
        origin: t.partnerUrl,
        "connect-protocol-version": "1",
      };
      for (const path of [
        "/portal.v1.TeamService/InviteMember",
        "/portal.v1.TeamService/ListMembers",
        "/portal.v1.PortalAuthService/SignIn",
        "/portal.v1.PortalAuthService/WhoAmI",
      ]) {
        const res = await raw(
          path,
          headers,
          path.endsWith("InviteMember") ? { email: "x@example.com", role: "admin" } : {},
        );
        expect(res.status, path).toBe(403);
      }
    }
  });
});

describe("invites", () => {
  it("are single use, and expire after 72 hours", async () => {
    const invited = await portalAdmin(t).inviteMember({
      partnerId: a.partnerId,
      email: "late@example.com",
      role: "viewer",
    });
    const auth = browser(t.partnerUrl).client(PortalAuthService);
    const token = tokenOf(invited.inviteUrl);
    expect(await code(auth.getInvite({ token }))).toBe("ok");
    clock.advance(72 * ms.hour + ms.second);
    expect(await code(auth.getInvite({ token }))).toBe("NotFound");
    expect(await code(auth.acceptInvite({ token, password: "a long enough passphrase" }))).toBe("NotFound");

    const once = await portalAdmin(t).inviteMember({
      partnerId: a.partnerId,
      email: "once@example.com",
      role: "viewer",
    });
    const t1 = tokenOf(once.inviteUrl);
    const { secret } = await auth.acceptInvite({ token: t1, password: "a long enough passphrase" });
    expect(await code(auth.confirmEnrolment({ token: t1, code: totpCode(secret, clock) }))).toBe("ok");
    expect(await code(auth.confirmEnrolment({ token: t1, code: totpCode(secret, clock) }))).toBe("NotFound");
    expect(await code(auth.acceptInvite({ token: t1, password: "another long passphrase" }))).toBe(
      "NotFound",
    );
    // The email is now a member's: no second membership anywhere.
    expect(
      await code(
        portalAdmin(t).inviteMember({ partnerId: b.partnerId, email: "ONCE@example.com", role: "admin" }),
      ),
    ).toBe("Aborted");
  });
});

describe("an invite's enrolment codes", () => {
  it("can be guessed ten times, then the invite is spent and even the right code is refused", async () => {
    const invited = await portalAdmin(t).inviteMember({
      partnerId: a.partnerId,
      email: "guessed@example.com",
      role: "admin",
    });
    const auth = browser(t.partnerUrl).client(PortalAuthService);
    const token = tokenOf(invited.inviteUrl);
    const { secret } = await auth.acceptInvite({ token, password: "a long enough passphrase" });
    const right = totpCode(secret, clock);
    const wrong = String((Number(right) + 500_000) % 1_000_000).padStart(6, "0");
    const answers: string[] = [];
    for (let i = 0; i < 10; i++) answers.push(await code(auth.confirmEnrolment({ token, code: wrong })));
    expect(answers.slice(0, 9)).toEqual(Array(9).fill("InvalidArgument"));
    expect(answers[9]).toBe("NotFound");
    expect(await code(auth.confirmEnrolment({ token, code: right }))).toBe("NotFound");
    expect(await code(auth.acceptInvite({ token, password: "another long passphrase" }))).toBe("NotFound");
    expect(await code(auth.getInvite({ token }))).toBe("NotFound");
    // Starting over (a new password, a new secret) does not give the guesses back.
    const again = await portalAdmin(t).inviteMember({
      partnerId: a.partnerId,
      email: "guessed@example.com",
      role: "admin",
    });
    const t2 = tokenOf(again.inviteUrl);
    await auth.acceptInvite({ token: t2, password: "a long enough passphrase" });
    for (let i = 0; i < 9; i++)
      expect(await code(auth.confirmEnrolment({ token: t2, code: wrong }))).toBe("InvalidArgument");
    const restart = await auth.acceptInvite({ token: t2, password: "a long enough passphrase" });
    expect(await code(auth.confirmEnrolment({ token: t2, code: wrong }))).toBe("NotFound");
    expect(await code(auth.confirmEnrolment({ token: t2, code: totpCode(restart.secret, clock) }))).toBe(
      "NotFound",
    );
  });
});

describe("guessing", () => {
  it("is throttled with 429 and Retry-After, the same for a member's email and an unknown one", async () => {
    const victim = await member(t, clock, a.partnerId, "developer");
    const answers = async (email: string) => {
      const seen: string[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await raw(
          "/portal.v1.PortalAuthService/SignIn",
          { origin: t.partnerUrl, "connect-protocol-version": "1" },
          { email, password: `wrong password ${i}`, code: "123456" },
        );
        const body = (await res.json()) as { code: string; message: string };
        seen.push(`${res.status} ${body.code} ${body.message} ${res.headers.get("retry-after") ?? ""}`);
      }
      return seen;
    };
    const known = await answers(victim.email);
    const unknown = await answers(`nobody-${Date.now()}@example.com`);
    // Retry-After counts down in the database's time between the two runs, so it is compared apart.
    const bare = (seen: string[]) => seen.map((s) => s.replace(/ \d+$/, ""));
    expect(bare(known)).toEqual(bare(unknown));
    expect(known.slice(0, 5).every((s) => s.startsWith("401 unauthenticated"))).toBe(true);
    for (const seen of [known, unknown]) expect(seen[5]).toMatch(/^429 resource_exhausted .* \d+$/);
    // From a browser that has never signed in as the member, even the right password waits.
    const right = browser(t.partnerUrl).client(PortalAuthService);
    clock.advance(31 * ms.second);
    expect(
      await code(
        right.signIn({
          email: victim.email,
          password: victim.password,
          code: totpCode(victim.secret, clock),
        }),
      ),
    ).toBe("ResourceExhausted");
    // The member's own browser (its device cookie since joining) does not.
    expect(
      await code(
        victim.browser.client(PortalAuthService).signIn({
          email: victim.email,
          password: victim.password,
          code: totpCode(victim.secret, clock),
        }),
      ),
    ).toBe("ok");
  });
});

describe("secrets", () => {
  it("never appear in the logs or in the audit log", async () => {
    const audit = JSON.stringify(
      (await portalAdmin(t).listAuditEvents({ partnerId: a.partnerId, limit: 100 })).events.map((e) => ({
        ...e,
      })),
      (_k, v) => (typeof v === "bigint" ? String(v) : v),
    );
    const text = `${logs.join("\n")}\n${audit}`;
    expect(audit).toContain("api_call");
    for (const m of [adminA, adminB]) {
      for (const secret of [
        m.password,
        m.secret,
        ...m.recoveryCodes,
        (m.browser.cookie ?? "").split("=")[1] ?? "",
        (m.browser.device ?? "").split("=")[1] ?? "",
      ])
        expect(text).not.toContain(secret);
    }
  });
});

describe("a portal session's rate limits", () => {
  it("are the member's own in each environment, sized and shown by that environment's limits", async () => {
    const c = await createPartner(t);
    const dev = await member(t, clock, c.partnerId, "developer");
    await t.internal.partners.setPartnerLimits({
      partnerId: c.partnerId,
      environment: "production",
      limits: { read: { capacity: 3, refillPerSecond: 0.01 } },
    });
    await t.internal.partners.setPartnerLimits({
      partnerId: c.partnerId,
      environment: "sandbox",
      limits: { read: { capacity: 1000, refillPerSecond: 100 } },
    });
    const call = (environment: string) =>
      raw("/partner.v1.KeysService/ListKeys", {
        cookie: dev.browser.cookie ?? "",
        origin: t.partnerUrl,
        "connect-protocol-version": "1",
        "x-portal-environment": environment,
      });
    // The sandbox first: its large bucket must not become production's.
    const sandbox = await call("sandbox");
    expect(sandbox.status).toBe(200);
    expect(sandbox.headers.get("ratelimit-policy")).toBe('"read";q=1000;w=10');
    const production = await Promise.all(Array.from({ length: 12 }, () => call("production")));
    expect(production.filter((r) => r.status === 200)).toHaveLength(3);
    expect(production.filter((r) => r.status === 429)).toHaveLength(9);
    expect(new Set(production.map((r) => r.headers.get("ratelimit-policy")))).toEqual(
      new Set(['"read";q=3;w=300']),
    );
    // And production's empty bucket is not the sandbox's.
    const again = await call("sandbox");
    expect(again.status).toBe(200);
    expect(again.headers.get("ratelimit-policy")).toBe('"read";q=1000;w=10');
  });
});

describe("a member's calls to the portal's own services", () => {
  it("draw on the member's own buckets: 429 with Retry-After past them, nobody else slowed", async () => {
    const small = await startTestApp({
      clock,
      config: {
        rateLimits: {
          read: { capacity: 5, refillPerSecond: 0.01 },
          write: { capacity: 5, refillPerSecond: 0.01 },
        },
      },
    });
    try {
      const p = await createPartner(small);
      const one = await member(small, clock, p.partnerId, "admin");
      const other = await member(small, clock, p.partnerId, "admin");
      const list = (m: MemberFixture) =>
        fetch(`${small.partnerUrl}/portal.v1.TeamService/ListMembers`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            cookie: m.browser.cookie ?? "",
            origin: small.partnerUrl,
            "connect-protocol-version": "1",
          },
          body: "{}",
        });
      const answers = await Promise.all(Array.from({ length: 8 }, () => list(one)));
      expect(answers.filter((r) => r.status === 200)).toHaveLength(5);
      const refused = answers.filter((r) => r.status === 429);
      expect(refused).toHaveLength(3);
      for (const r of refused) {
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        expect(((await r.json()) as { code: string }).code).toBe("resource_exhausted");
      }
      expect(answers[0]?.headers.get("ratelimit-policy")).toBe('"read";q=5;w=500');
      // Another member, and the same member's partner API calls, have buckets of their own.
      expect((await list(other)).status).toBe(200);
      const keys = await fetch(`${small.partnerUrl}/partner.v1.KeysService/ListKeys`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          cookie: one.browser.cookie ?? "",
          origin: small.partnerUrl,
          "connect-protocol-version": "1",
          "x-portal-environment": "sandbox",
        },
        body: "{}",
      });
      expect(keys.status).toBe(200);
    } finally {
      await small.stop();
    }
  });
});

describe("the portal over HTTP/2", () => {
  it("answers as over HTTP/1.1: a session call is served, a wrong sign-in is 401, never a 500", async () => {
    const http2 = await import("node:http2");
    const fresh = await member(t, clock, a.partnerId, "viewer");
    const session = http2.connect(t.partnerUrl);
    try {
      const call = (path: string, headers: Record<string, string>, body: unknown) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = session.request({
            ":method": "POST",
            ":path": path,
            "content-type": "application/json",
            origin: t.partnerUrl,
            "connect-protocol-version": "1",
            ...headers,
          });
          let status = 0;
          let text = "";
          req.on("response", (h) => {
            status = Number(h[":status"]);
          });
          req.setEncoding("utf8");
          req.on("data", (c: string) => {
            text += c;
          });
          req.on("end", () => resolve({ status, body: text }));
          req.on("error", reject);
          req.end(JSON.stringify(body));
        });
      const who = await call(
        "/portal.v1.PortalAuthService/WhoAmI",
        { cookie: fresh.browser.cookie ?? "" },
        {},
      );
      expect(who.status, who.body).toBe(200);
      expect(who.body).toContain(fresh.email);
      const wrong = await call(
        "/portal.v1.PortalAuthService/SignIn",
        {},
        { email: "nobody-h2@example.com", password: "not the password at all", code: "000000" },
      );
      expect([401, 429], wrong.body).toContain(wrong.status);
      // Another origin is still refused over HTTP/2.
      const forged = await call(
        "/portal.v1.PortalAuthService/WhoAmI",
        { cookie: fresh.browser.cookie ?? "", origin: "https://evil.example" },
        {},
      );
      expect(forged.status).toBe(403);
    } finally {
      session.close();
    }
  });
});

describe("bursts aimed at one account, and guessed invite tokens", () => {
  it("are held to the account's budget, and never hash a password for an unknown invite", async () => {
    const own = await startTestApp({ clock });
    try {
      const p = await createPartner(own);
      const victim = await member(own, clock, p.partnerId, "developer");
      const signIn = (email: string, password: string) =>
        fetch(`${own.partnerUrl}/portal.v1.PortalAuthService/SignIn`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            origin: own.partnerUrl,
            "connect-protocol-version": "1",
          },
          body: JSON.stringify({ email, password, code: "000000" }),
        });
      // 12 guesses at once at one account: its five are weighed, the rest are 429 at once, so the account's
      // budget cannot be outrun by arriving together.
      const burst = await Promise.all(
        Array.from({ length: 12 }, (_, i) => signIn(victim.email, `wrong ${i}`)),
      );
      const weighed = burst.filter((r) => r.status === 401).length;
      expect(weighed).toBe(defaultPortalSigninLimits.account.capacity);
      expect(burst.filter((r) => r.status === 429)).toHaveLength(12 - weighed);
      for (const r of burst.filter((x) => x.status === 429))
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

      // 60 guessed invite tokens at once: each a 404 without a password hash, so a real person's sign-in at
      // the same moment is served, not told the service is busy.
      const guesses = Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          fetch(`${own.partnerUrl}/portal.v1.PortalAuthService/AcceptInvite`, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              origin: own.partnerUrl,
              "connect-protocol-version": "1",
            },
            body: JSON.stringify({
              token: `${String(i).padStart(2, "0")}${"A".repeat(41)}`,
              password: "twelve chars!!",
            }),
          }).then((r) => r.status),
        ),
      );
      const other = await member(own, clock, p.partnerId, "viewer");
      const right = await fetch(`${own.partnerUrl}/portal.v1.PortalAuthService/SignIn`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          origin: own.partnerUrl,
          "connect-protocol-version": "1",
        },
        body: JSON.stringify({
          email: other.email,
          password: other.password,
          code: other.recoveryCodes[0],
        }),
      });
      expect(right.status).toBe(200);
      expect(new Set(await guesses)).toEqual(new Set([404]));
    } finally {
      await own.stop();
    }
  }, 60_000);
});
