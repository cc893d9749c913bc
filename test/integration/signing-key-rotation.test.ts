import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

const clock = new ManualClock("2027-02-15T10:00:00Z");
let t: TestApp;
let partner: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp({ clock });
  partner = await createPartner(t);
});
afterAll(() => t?.stop());

async function published(key = partner.sandboxKey) {
  const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key });
  expect(res.status).toBe(200);
  return res.body.keys as {
    kid: string;
    status: string;
    notBefore: string;
    notAfter: string;
    environment: string;
  }[];
}

/** Runs the scheduled maintenance job through pg-boss, as the cron would. */
const maintain = () => t.app.runJob("signing-keys.maintain", {});

describe("quarterly signing-key rotation", () => {
  let first: string;
  let second: string;

  it("starts with one ACTIVE key that retires when the quarter turns", async () => {
    const keys = await published();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ status: "ACTIVE", notAfter: "2027-05-01T00:00:00Z" });
    first = keys[0]?.kid ?? "";
  });

  it("publishes nothing new until 30 days before the turn", async () => {
    clock.set("2027-03-01T23:59:59Z");
    await maintain();
    expect((await published()).map((k) => k.status)).toEqual(["ACTIVE"]);
  });

  it("publishes the next quarter's key as INCOMING 30 days ahead", async () => {
    clock.set("2027-03-02T00:00:00Z");
    await maintain();
    await maintain(); // idempotent: a second run (or another instance) adds nothing
    const keys = await published();
    expect(keys.map((k) => [k.kid === first, k.status])).toEqual([
      [true, "ACTIVE"],
      [false, "INCOMING"],
    ]);
    expect(keys[1]).toMatchObject({ notBefore: "2027-04-01T00:00:00Z", notAfter: "2027-07-31T00:00:00Z" });
    second = keys[1]?.kid ?? "";
  });

  it("switches at the turn: the new key ACTIVE and signing, the old one OUTGOING", async () => {
    clock.set("2027-03-31T23:59:59.999Z");
    expect((await t.app.services.signingKeys.signer(t.app.orm.em.fork(), "sandbox")).kid).toBe(first);
    clock.set("2027-04-01T00:00:00Z");
    const keys = await published();
    expect(keys.map((k) => [k.kid, k.status])).toEqual([
      [second, "ACTIVE"],
      [first, "OUTGOING"],
    ]);
    expect((await t.app.services.signingKeys.signer(t.app.orm.em.fork(), "sandbox")).kid).toBe(second);
  });

  it("drops the old key 30 days after the turn", async () => {
    clock.set("2027-04-30T23:59:59Z");
    expect((await published()).map((k) => k.kid)).toEqual([second, first]);
    clock.set("2027-05-01T00:00:00Z");
    expect((await published()).map((k) => k.kid)).toEqual([second]);
  });

  it("keeps the production schedule separate", async () => {
    const live = await published(partner.liveKey);
    expect(live.every((k) => k.environment === "production")).toBe(true);
    expect(live.map((k) => k.kid)).not.toContain(second);
    expect(live.map((k) => k.status)).toEqual(["ACTIVE"]);
  });

  it("rotates early on request: a new ACTIVE key now, the replaced one OUTGOING for 30 days", async () => {
    clock.set("2027-05-10T12:00:00Z");
    const res = await t.internal.signingKeys.rotateSigningKey({ environment: "sandbox" });
    const third = res.key?.kid ?? "";
    expect(third).not.toBe(second);
    const keys = await published();
    expect(keys.map((k) => [k.kid, k.status])).toEqual([
      [third, "ACTIVE"],
      [second, "OUTGOING"],
    ]);
    expect(keys[1]?.notAfter).toBe("2027-06-09T12:00:00Z");
    // The rotated-in key still hands over at the next quarter turn.
    clock.set("2027-06-01T00:00:00Z");
    await maintain();
    const june = await published();
    expect(june.map((k) => k.status)).toEqual(["ACTIVE", "INCOMING", "OUTGOING"]);
    expect(june[1]?.notBefore).toBe("2027-07-01T00:00:00Z");
  });
});
