import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SandboxAdminService } from "../../gen/internal/v1/sandbox_admin_pb.ts";
import { scopes } from "../../src/consent/scopes.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { internalClient, startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// `npm run cli -- sandbox seed [--partner P]` through the internal API it calls: the fixtures seeded again as
// documented, and one partner's sandbox restored, no other partner's.

const USER = "usr_sandboxTrusted";
const PHONE = "+2348000000001";
let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  a = await createPartner(t);
  b = await createPartner(t);
});
afterAll(() => t?.stop());

const admin = () => internalClient(SandboxAdminService, t.internalUrl, t.internalToken);
const post = (key: string, path: string, body?: unknown) =>
  rest(t.partnerUrl, "POST", path, { key, ...(body === undefined ? {} : { body }) });

async function consent(p: PartnerFixture) {
  const link = await post(p.sandboxKey, "/partner/v1/consent-links", {
    phoneNumber: PHONE,
    scopes: [...scopes],
    ledgerWindowDays: 365,
  });
  expect(link.status, JSON.stringify(link.body)).toBe(200);
  expect((await post(p.sandboxKey, `/partner/v1/sandbox/consent-links/${link.body.id}/accept`)).status).toBe(
    200,
  );
}
const standing = async (p: PartnerFixture) => {
  const res = await rest(t.partnerUrl, "GET", `/partner/v1/users/${USER}/snapshot`, { key: p.sandboxKey });
  return res.status === 200 ? res.body.standing : res.status;
};

describe("sandbox seed", () => {
  it("with --partner restores that partner's fixtures after it changed them, and no one else's", async () => {
    await consent(a);
    await consent(b);
    expect(await standing(a)).toMatchObject({ tier: "Trusted", score: 812 });
    for (const p of [a, b]) {
      const res = await post(p.sandboxKey, `/partner/v1/sandbox/users/${USER}/standing`, {
        tier: "Emerging",
        score: 300,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    expect(await standing(a)).toMatchObject({ tier: "Emerging", score: 300 });

    const res = await admin().seedSandbox({ partnerId: a.partnerId });
    expect(res).toMatchObject({ partnerId: a.partnerId, consents: 1, standings: 1 });
    expect(res.users).toBeGreaterThan(0);
    // A's sandbox is as on its first day (its consent gone too); B's re-score stands.
    await consent(a);
    expect(await standing(a)).toMatchObject({ tier: "Trusted", score: 812 });
    expect(await standing(b)).toMatchObject({ tier: "Emerging", score: 300 });
  });

  it("without --partner writes the fixture users again as documented", async () => {
    // Something changed the shared fixture (an operator's slip, a bad migration).
    await sql(t.app.orm.em.fork(), "update standings set tier = 'Unrated', score = 1 where user_id = $1", [
      USER,
    ]);
    await sql(t.app.orm.em.fork(), "update users set segment = 'other' where id = $1", [USER]);
    const res = await admin().seedSandbox({});
    expect(res.partnerId).toBe("");
    const [row] = await sql<{ tier: string; score: number }>(
      t.app.orm.em.fork(),
      "select tier, score from standings where user_id = $1",
      [USER],
    );
    expect(row).toMatchObject({ tier: "Trusted", score: 812 });
  });

  it("refuses an unknown partner with 404, changing nothing", async () => {
    const err = await admin()
      .seedSandbox({ partnerId: "ptn_01M86Z0000000000000000000" })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err?.code).toBe(Code.NotFound);
  });

  it("needs the service token", async () => {
    const err = await internalClient(SandboxAdminService, t.internalUrl, "itk_wrong")
      .seedSandbox({})
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err?.code).toBe(Code.Unauthenticated);
  });
});
