import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

const clock = new ManualClock("2027-06-01T12:00:00Z");
let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp({ clock, config: { role: "api" } });
  p = await createPartner(t);
  await createWebhook(t.partnerUrl, p.sandboxKey, {
    url: "http://127.0.0.1:9/hooks",
    events: ["consent.revoked"],
  });
});
afterAll(() => t?.stop());

describe("consent expiry", () => {
  it("expires a consent past expiresAt with consent.revoked from SYSTEM, and not a moment before", async () => {
    const u = await createUser(t);
    const { consent } = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
      expiresAt: timestampFromDate(new Date(clock.now().getTime() + ms.hour)),
    });
    const id = consent?.id as string;
    clock.advance(ms.hour - 1);
    expect(await t.app.services.consents.expireDue(t.app.orm.em.fork())).toBe(0);
    clock.advance(1);
    expect(await t.app.services.consents.expireDue(t.app.orm.em.fork())).toBe(1);
    const read = await rest(t.partnerUrl, "GET", `/partner/v1/consents/${id}`, { key: p.sandboxKey });
    expect(read.body).toMatchObject({
      status: "EXPIRED",
      revokedBy: "SYSTEM",
      revokedAt: "2027-06-01T13:00:00Z",
    });
    const events = await sql<{ body: string }>(
      t.app.orm.em.fork(),
      "select body from events where type = 'consent.revoked' and partner_id = $1",
      [p.partnerId],
    );
    expect(events.map((e) => JSON.parse(e.body).payload)).toContainEqual(
      expect.objectContaining({ consentId: id, revokedBy: "SYSTEM", status: "EXPIRED" }),
    );
    expect(await t.app.services.consents.expireDue(t.app.orm.em.fork())).toBe(0);
  });

  it("defaults a consent to one year", async () => {
    const u = await createUser(t);
    const { consent } = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: p.partnerId,
      scopes: ["kyc"],
      ledgerWindowDays: 7,
    });
    const read = await rest(t.partnerUrl, "GET", `/partner/v1/consents/${consent?.id}`, {
      key: p.sandboxKey,
    });
    expect(Date.parse(read.body.expiresAt) - Date.parse(read.body.grantedAt)).toBe(365 * ms.day);
  });
});
