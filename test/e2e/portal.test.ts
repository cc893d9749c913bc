import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  browser,
  enrol,
  type MemberFixture,
  member,
  portalAdmin,
  tokenOf,
  totpCode,
} from "../support/portal.ts";

// The portal's people, end to end over loopback: the operator invites, the person sets a password and enrols
// TOTP, signs in, and calls the partner API with the session cookie in place of an API key.
const clock = new ManualClock();
let t: TestApp;
let partner: PartnerFixture;
let admin: MemberFixture;

const code = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
};

beforeAll(async () => {
  t = await startTestApp({ clock });
  partner = await createPartner(t);
});
afterAll(() => t?.stop());

describe("joining", () => {
  it("invite → password → TOTP enrolment → member with recovery codes and a session", async () => {
    const email = `Ada.${Date.now()}@Example.com`;
    const invited = await portalAdmin(t).inviteMember({ partnerId: partner.partnerId, email, role: "admin" });
    expect(invited.inviteUrl).toMatch(new RegExp(`^${t.partnerUrl}/portal/invite#[0-9A-Za-z]{32}$`));
    expect(invited.invite?.email).toBe(email.toLowerCase());
    const expires = Number(invited.invite?.expiresAt?.seconds) * 1000 - clock.now().getTime();
    expect(Math.round(expires / ms.hour)).toBe(72);

    const b = browser(t.partnerUrl);
    const auth = b.client(PortalAuthService);
    const token = tokenOf(invited.inviteUrl);
    expect(await auth.getInvite({ token })).toMatchObject({ email: email.toLowerCase(), role: "admin" });
    expect(await code(auth.acceptInvite({ token, password: "short" }))).toBe("InvalidArgument");
    const enrolment = await auth.acceptInvite({ token, password: "a long enough passphrase" });
    expect(enrolment.otpauthUri).toMatch(/^otpauth:\/\/totp\/.*secret=/);
    expect(enrolment.qrSvg).toMatch(/^<svg/);
    expect(await code(auth.confirmEnrolment({ token, code: "000000" }))).toBe("InvalidArgument");
    const done = await auth.confirmEnrolment({ token, code: totpCode(enrolment.secret, clock) });
    expect(done.recoveryCodes).toHaveLength(10);
    expect(new Set(done.recoveryCodes).size).toBe(10);
    expect(b.cookie).toMatch(/^portal_session=[0-9A-Za-z]{43}$/);
    const me = await auth.whoAmI({});
    expect(me).toMatchObject({ partnerName: expect.any(String), environments: ["sandbox", "production"] });
    expect(me.member).toMatchObject({
      partnerId: partner.partnerId,
      role: "admin",
      email: email.toLowerCase(),
    });
    admin = {
      id: me.member?.id ?? "",
      email: email.toLowerCase(),
      password: "a long enough passphrase",
      secret: enrolment.secret,
      recoveryCodes: done.recoveryCodes,
      browser: b,
    };
    // The invite was single use.
    expect(await code(auth.getInvite({ token }))).toBe("NotFound");
  });

  it("sets an HttpOnly, SameSite=Strict cookie on path / (Secure only over https)", async () => {
    clock.advance(31 * ms.second);
    const res = await fetch(`${t.partnerUrl}/portal.v1.PortalAuthService/SignIn`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", origin: t.partnerUrl },
      body: JSON.stringify({
        email: admin.email,
        password: admin.password,
        code: totpCode(admin.secret, clock),
      }),
    });
    expect(res.status).toBe(200);
    const [session, device] = res.headers.getSetCookie();
    expect(session).toMatch(
      /^portal_session=[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    // And the browser is known to the member from now on, for sign-in only, for 180 days.
    expect(device).toMatch(
      /^portal_device=[0-9A-Za-z_-]+; Path=\/portal\.v1\.PortalAuthService\/SignIn; HttpOnly; SameSite=Strict; Max-Age=15552000$/,
    );
  });
});

describe("the partner API with a session", () => {
  it("serves the selected environment, and records each write in the audit log", async () => {
    const keys = await admin.browser.client(KeysService).listKeys({});
    expect(keys.keys.every((k) => k.environment === "sandbox")).toBe(true);
    admin.browser.environment = "production";
    expect(
      (await admin.browser.client(KeysService).listKeys({})).keys.every(
        (k) => k.environment === "production",
      ),
    ).toBe(true);
    admin.browser.environment = "nowhere";
    expect(await code(admin.browser.client(KeysService).listKeys({}))).toBe("InvalidArgument");
    admin.browser.environment = "sandbox";

    const { webhook } = await admin.browser
      .client(WebhookService)
      .createWebhook({ url: "http://127.0.0.1:9/portal-hook", events: ["*"] });
    expect(webhook?.id).toMatch(/^whk_/);
    const { events } = await admin.browser.client(TeamService).listAuditEvents({});
    const call = events.find((e) => e.action === "api_call");
    expect(call).toMatchObject({
      actor: admin.id,
      actorEmail: admin.email,
      target: webhook?.id,
      outcome: "ok",
      environment: "sandbox",
      detail: "partner.v1.WebhookService/CreateWebhook",
      clientAddress: expect.stringMatching(/127\.0\.0\.1/),
    });
    expect(events.map((e) => e.action)).toEqual(expect.arrayContaining(["enrolled", "sign_in", "api_call"]));
    // Over REST too, and the log says where from.
    const overRest = await fetch(`${t.partnerUrl}/partner/v1/webhooks`, {
      method: "POST",
      headers: {
        cookie: admin.browser.cookie ?? "",
        origin: t.partnerUrl,
        "connect-protocol-version": "1",
        "x-portal-environment": "sandbox",
        "content-type": "application/json",
      },
      body: JSON.stringify({ url: "http://127.0.0.1:9/portal-rest-hook", events: ["*"] }),
    });
    expect(overRest.status).toBe(200);
    const restId = ((await overRest.json()) as { id: string }).id;
    const after = await admin.browser.client(TeamService).listAuditEvents({});
    expect(after.events.find((e) => e.target === restId)).toMatchObject({
      action: "api_call",
      detail: "partner.v1.WebhookService/CreateWebhook",
      clientAddress: expect.stringMatching(/127\.0\.0\.1/),
    });
    // The operator reads the same log.
    const viaOperator = await portalAdmin(t).listAuditEvents({ partnerId: partner.partnerId, limit: 2 });
    expect(viaOperator.events).toHaveLength(2);
    expect(viaOperator.hasMore).toBe(true);
  });

  it("lets a viewer read, never write (403 permission_denied)", async () => {
    const viewer = await member(t, clock, partner.partnerId, "viewer");
    expect(await code(viewer.browser.client(KeysService).listKeys({}))).toBe("ok");
    expect(
      await code(
        viewer.browser.client(WebhookService).createWebhook({ url: "https://x.example.com", events: ["*"] }),
      ),
    ).toBe("PermissionDenied");
    const res = await fetch(`${t.partnerUrl}/partner.v1.WebhookService/CreateWebhook`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "connect-protocol-version": "1",
        origin: t.partnerUrl,
        cookie: viewer.browser.cookie ?? "",
        "x-portal-environment": "sandbox",
      },
      body: JSON.stringify({ url: "https://x.example.com", events: ["*"] }),
    });
    expect(res.status).toBe(403);
    expect(await code(viewer.browser.client(TeamService).listMembers({}))).toBe("PermissionDenied");
  });
});

describe("sessions", () => {
  it("end after 30 idle minutes, and after 12 hours however busy", async () => {
    const dev = await member(t, clock, partner.partnerId, "developer");
    const keys = dev.browser.client(KeysService);
    clock.advance(29 * ms.minute);
    expect(await code(keys.listKeys({}))).toBe("ok");
    clock.advance(31 * ms.minute);
    expect(await code(keys.listKeys({}))).toBe("Unauthenticated");

    clock.advance(31 * ms.second);
    await dev.browser.client(PortalAuthService).signIn({
      email: dev.email,
      password: dev.password,
      code: totpCode(dev.secret, clock),
    });
    for (let spent = 0; spent < 12 * ms.hour - 25 * ms.minute; spent += 25 * ms.minute) {
      clock.advance(25 * ms.minute);
      expect(await code(keys.listKeys({}))).toBe("ok");
    }
    clock.advance(25 * ms.minute);
    expect(await code(keys.listKeys({}))).toBe("Unauthenticated");
  });

  it("sign out everywhere ends every session of the member", async () => {
    const dev = await member(t, clock, partner.partnerId, "developer");
    const other = browser(t.partnerUrl);
    clock.advance(31 * ms.second);
    await other
      .client(PortalAuthService)
      .signIn({ email: dev.email, password: dev.password, code: totpCode(dev.secret, clock) });
    expect(await code(other.client(KeysService).listKeys({}))).toBe("ok");
    const { sessionsEnded } = await dev.browser.client(PortalAuthService).signOutEverywhere({});
    expect(sessionsEnded).toBe(2);
    expect(await code(other.client(KeysService).listKeys({}))).toBe("Unauthenticated");
    expect(dev.browser.cookie).toBeUndefined();
  });

  it("a recovery code signs in once", async () => {
    const dev = await member(t, clock, partner.partnerId, "developer");
    const b = browser(t.partnerUrl);
    const auth = b.client(PortalAuthService);
    const recovery = dev.recoveryCodes[3] ?? "";
    expect(await code(auth.signIn({ email: dev.email, password: dev.password, code: recovery }))).toBe("ok");
    expect(await code(auth.signIn({ email: dev.email, password: dev.password, code: recovery }))).toBe(
      "Unauthenticated",
    );
    // A TOTP code is spent once too.
    clock.advance(31 * ms.second);
    const totp = totpCode(dev.secret, clock);
    expect(await code(auth.signIn({ email: dev.email, password: dev.password, code: totp }))).toBe("ok");
    expect(await code(auth.signIn({ email: dev.email, password: dev.password, code: totp }))).toBe(
      "Unauthenticated",
    );
  });
});

describe("the team", () => {
  it("admins invite, change roles and remove; the last admin stays", async () => {
    clock.advance(31 * ms.second);
    await admin.browser
      .client(PortalAuthService)
      .signIn({ email: admin.email, password: admin.password, code: totpCode(admin.secret, clock) });
    const team = admin.browser.client(TeamService);
    expect(await code(team.changeRole({ memberId: admin.id, role: "viewer" }))).toBe("Aborted");
    expect(await code(team.removeMember({ memberId: admin.id }))).toBe("Aborted");
    const { inviteUrl } = await team.inviteMember({
      email: `second-${Date.now()}@example.com`,
      role: "developer",
    });
    expect(inviteUrl).toMatch(/\/portal\/invite#/);
    const second = await enrol(t, clock, inviteUrl, "second");
    expect((await team.changeRole({ memberId: second.id, role: "admin" })).member?.role).toBe("admin");
    expect(await code(team.changeRole({ memberId: admin.id, role: "developer" }))).toBe("ok");
    expect(
      await code(second.browser.client(TeamService).changeRole({ memberId: admin.id, role: "admin" })),
    ).toBe("ok");
    await team.removeMember({ memberId: second.id });
    expect(await code(second.browser.client(KeysService).listKeys({}))).toBe("Unauthenticated");
    const { members } = await team.listMembers({});
    expect(members.map((m) => m.id)).not.toContain(second.id);
  });
});

describe("retention", () => {
  it("purges ended sessions at once, sign-in buckets once full again, used or expired invites after 30 days, audit events after a year", async () => {
    const count = async (table: string, where = "true") => {
      const [row] = await sql<{ n: number }>(
        t.app.orm.em.fork(),
        `select count(*)::int as n from ${table} where ${where}`,
      );
      return row?.n ?? 0;
    };
    const signinBuckets = () => count("rate_limit_buckets", "bucket_key like 'portal-signin-%'");
    const purge = () => t.app.services.retention.purge(t.app.orm.em.fork());
    expect(await signinBuckets()).toBeGreaterThan(0);
    // Past every invite's 72 hours, and 30 days more.
    clock.advance(34 * ms.day);
    const first = await purge();
    expect(first["portal sessions"]?.deleted.portal_sessions).toBeGreaterThan(0);
    expect(first["portal invites"]?.deleted.portal_invites).toBeGreaterThan(0);
    expect(first["rate-limit buckets full again"]?.deleted.rate_limit_buckets).toBeGreaterThan(0);
    expect(await count("portal_sessions")).toBe(0);
    expect(await count("portal_invites")).toBe(0);
    expect(await signinBuckets()).toBe(0);
    expect(await count("portal_audit_events")).toBeGreaterThan(0);
    clock.advance(366 * ms.day);
    await purge();
    expect(await count("portal_audit_events")).toBe(0);
    expect(
      await t.app.services.metrics.retentionPurged.get({ table: "portal_audit_events" }),
    ).toBeGreaterThan(0);
  });
});
