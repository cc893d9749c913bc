import { createPublicKey, verify as nodeVerify } from "node:crypto";
import { fromJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import canonicalize from "canonicalize";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SnapshotSchema, SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { scopes } from "../../src/consent/scopes.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createSnapshotVerifier, SnapshotVerificationError } from "../../src/sdk/snapshots.ts";
import { createWebhook } from "../factories/events.ts";
import { bruteForceWindow, generateEntries, ingestEntries } from "../factories/ledger.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let p: PartnerFixture;
let trader: { userId: string; phoneNumber: string };
let entries: ReturnType<typeof generateEntries>;

beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
  trader = await createUser(t, { segment: "trader" });
  entries = generateEntries(trader.userId, 600);
  await ingestEntries(t, entries);
  await t.internal.ingest.upsertStanding({
    updates: [
      {
        userId: trader.userId,
        tier: "Established",
        score: 640,
        scoreVersion: "v3",
        tenureDays: 400,
        monthsInTier: 5,
        scoreChange90d: -12,
        disputesLast90d: 0,
        monthsActive: 13,
        activeDaysLast30d: 22,
        incomeRegularityBps: 7400,
        employmentVerified: false,
        asOf: timestampFromDate(new Date()),
      },
    ],
  });
  await t.internal.ingest.upsertKyc({
    updates: [
      {
        userId: trader.userId,
        level: "FULL",
        bvnVerified: true,
        ninVerified: true,
        phoneVerified: true,
        addressVerified: false,
        livenessChecked: true,
        verifiedAt: timestampFromDate(new Date()),
      },
    ],
  });
});
afterAll(() => t?.stop());

const grant = async (userId: string, granted: string[], ledgerWindowDays = 90, maxLedgerWindowDays = 365) =>
  (
    await t.internal.consents.grantConsent({
      userId,
      partnerId: p.partnerId,
      scopes: granted,
      ledgerWindowDays,
      maxLedgerWindowDays,
    })
  ).consent?.id as string;
const read = (userId: string, query = "", key = p.sandboxKey) =>
  rest(t.partnerUrl, "GET", `/partner/v1/users/${userId}/snapshot${query}`, { key });
const sandboxVerifier = () =>
  createSnapshotVerifier({ baseUrl: t.partnerUrl, apiKey: p.sandboxKey, environment: "sandbox" });

describe("the scope rule", () => {
  it("holds for all 128 scope combinations, each verifying and parsing into Snapshot", async () => {
    const verifier = sandboxVerifier();
    for (let mask = 0; mask < 1 << scopes.length; mask++) {
      const granted = scopes.filter((_, i) => mask & (1 << i));
      if (granted.length === 0) continue; // a consent needs a scope; the empty set is the "no consent" case below
      await grant(trader.userId, granted);
      const res = await read(trader.userId);
      expect(res.status, granted.join(",")).toBe(200);
      const doc = res.body;
      const has = (s: string) => granted.includes(s as never);
      expect(doc.standing === null, "standing null iff out of scope").toBe(!has("standing"));
      expect("standing" in doc).toBe(true);
      expect("standing" in doc.signals).toBe(has("signals.standing"));
      expect("work" in doc.signals).toBe(has("signals.work"));
      expect("cashflow" in doc.signals).toBe(has("signals.cashflow"));
      expect("ledgerWindow" in doc).toBe(has("ledger"));
      expect("kyc" in doc).toBe(has("kyc"));
      expect("repaymentHistory" in doc).toBe(false); // never borrowed
      await verifier.verify(JSON.stringify(doc));
      expect(() => fromJson(SnapshotSchema, doc)).not.toThrow();
    }
  });

  it("answers 403 consent_required without a consent", async () => {
    const u = await createUser(t);
    const res = await read(u.userId);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("consent_required");
    expect((await read("usr_nobody")).body.code).toBe("consent_required");
  });
});

describe("signatures", () => {
  it("verify with an independent RFC 8785 implementation and node:crypto, and fail if any field changes", async () => {
    await grant(trader.userId, [...scopes]);
    const doc = (await read(trader.userId)).body;
    const keys = (await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey })).body.keys;
    const key = keys.find((k: { kid: string }) => k.kid === doc.signature.kid);
    const publicKey = createPublicKey({
      key: { kty: "OKP", crv: "Ed25519", x: key.publicKey },
      format: "jwk",
    });
    const check = (d: Record<string, unknown>) => {
      const { signature, ...unsigned } = d as { signature: { value: string } };
      return nodeVerify(
        null,
        Buffer.from(canonicalize(unsigned) as string),
        publicKey,
        Buffer.from(signature.value, "base64url"),
      );
    };
    expect(check(doc)).toBe(true);
    // Every leaf, changed: the signature no longer holds.
    const paths: string[][] = [];
    const walk = (v: unknown, path: string[]) => {
      if (v !== null && typeof v === "object") for (const [k, c] of Object.entries(v)) walk(c, [...path, k]);
      else paths.push(path);
    };
    const { signature: _s, ...unsigned } = doc;
    walk(unsigned, []);
    expect(paths.length).toBeGreaterThan(30);
    for (const path of paths) {
      const copy = structuredClone(doc);
      let parent = copy;
      for (const k of path.slice(0, -1)) parent = parent[k];
      const last = path.at(-1) as string;
      const v = parent[last];
      parent[last] = v === null ? 0 : typeof v === "boolean" ? !v : typeof v === "number" ? v + 1 : `${v}x`;
      expect(check(copy), path.join(".")).toBe(false);
    }
  });

  it("reaches Connect and gRPC clients as the same signed bytes", async () => {
    await grant(trader.userId, ["standing", "kyc"]);
    const body = await connectClient(SnapshotService, t.partnerUrl, `Bearer ${p.sandboxKey}`).getSnapshot({
      userId: trader.userId,
    });
    expect(body.contentType).toBe("application/json");
    const text = new TextDecoder().decode(body.data);
    const verified = await sandboxVerifier().verify(text);
    expect(verified).toMatchObject({
      userId: trader.userId,
      standing: { tier: "Established", tierRank: 2, score: 640, scoreVersion: "v3" },
    });
    expect(fromJson(SnapshotSchema, JSON.parse(text)).kyc?.bvnVerified).toBe(true);
  });

  it("verifies snapshots signed by either key during a rotation overlap, and pins the environment", async () => {
    await grant(trader.userId, ["standing"]);
    const verifier = sandboxVerifier();
    const before = (await read(trader.userId)).body;
    await verifier.verify(before);
    await t.internal.signingKeys.rotateSigningKey({ environment: "sandbox" });
    const after = (await read(trader.userId)).body;
    expect(after.signature.kid).not.toBe(before.signature.kid);
    // The cached key document lacks the new kid: the verifier refetches once.
    await verifier.verify(after);
    await verifier.verify(before);

    const production = createSnapshotVerifier({
      baseUrl: t.partnerUrl,
      apiKey: p.liveKey,
      environment: "production",
    });
    await expect(production.verify(after)).rejects.toMatchObject({ code: "environment_mismatch" });
    // Claiming production in the document does not help: the sandbox kid is not a production key.
    await expect(production.verify({ ...after, environment: "production" })).rejects.toBeInstanceOf(
      SnapshotVerificationError,
    );
    await expect(verifier.verify({ ...after, userId: "usr_someoneelse" })).rejects.toMatchObject({
      code: "bad_signature",
    });
  });
});

describe("consent and window rules", () => {
  it("fails the very next read after a revocation with consent_revoked, and an expired consent with consent_expired", async () => {
    const id = await grant(trader.userId, ["standing"]);
    expect((await read(trader.userId)).status).toBe(200);
    await t.internal.consents.revokeConsent({ consentId: id });
    const res = await read(trader.userId);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: "consent_revoked", details: { consentId: id } });

    const next = await grant(trader.userId, ["standing"]);
    await sql(
      t.app.orm.em.fork(),
      "update consents set expires_at = now() - interval '1 second' where id = $1",
      [next],
    );
    expect((await read(trader.userId)).body.code).toBe("consent_expired");
  });

  it("checks ledger_window_days: 1 to 365, and within the consent's maximum", async () => {
    await grant(trader.userId, ["ledger"], 30, 90);
    for (const bad of ["0", "366", "abc", "1.5", "-3", "99999999999"]) {
      const res = await read(trader.userId, `?ledger_window_days=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.code).toBe("invalid_ledger_window");
    }
    const over = await read(trader.userId, "?ledger_window_days=91");
    expect(over.status).toBe(403);
    expect(over.body.code).toBe("ledger_window_exceeds_consent");
    expect((await read(trader.userId)).body.ledgerWindow.days).toBe(30);
    expect((await read(trader.userId, "?ledger_window_days=90")).body.ledgerWindow.days).toBe(90);
  });

  it("makes a new snapshot on every read", async () => {
    await grant(trader.userId, ["standing"]);
    const [a, b] = [(await read(trader.userId)).body, (await read(trader.userId)).body];
    expect(a.snapshotId).not.toBe(b.snapshotId);
    expect(a.signature.value).not.toBe(b.signature.value);
  });
});

describe("ledger figures", () => {
  it("equal a brute-force computation over the raw entries for random users and windows, traders included", async () => {
    const users = [{ ...trader, entries, trader: true }];
    for (const segment of ["salaried", "trader", "gig"]) {
      const u = await createUser(t, { segment });
      const generated = generateEntries(u.userId, 150 + Math.floor(Math.random() * 300), 400, 12);
      await ingestEntries(t, generated);
      users.push({ ...u, entries: generated, trader: segment === "trader" });
    }
    for (const u of users) {
      await grant(u.userId, ["ledger"], 30, 365);
      for (const days of [1, 7, 30, 31, 90, 180, 364, 365, 1 + Math.floor(Math.random() * 365)]) {
        const res = await read(u.userId, `?ledger_window_days=${days}`);
        const expected = bruteForceWindow(u.entries, days);
        expect(res.body.ledgerWindow, `${u.userId} ${days}`).toEqual({
          ...expected,
          dailyAvgInflowKobo: u.trader ? expected.dailyAvgInflowKobo : null,
          distinctSendersLast30d: u.trader ? expected.distinctSendersLast30d : null,
        });
      }
    }
  });

  it("takes concurrent batches for the same user without deadlocks or lost updates", async () => {
    const u = await createUser(t, { segment: "trader" });
    const generated = generateEntries(u.userId, 3_000, 60, 30);
    const batches = Array.from({ length: 6 }, (_, i) => generated.slice(i * 500, (i + 1) * 500));
    const results = await Promise.all(batches.map((b) => ingestEntries(t, b)));
    expect(results.reduce((n, r) => n + r.inserted, 0)).toBe(3_000);
    await grant(u.userId, ["ledger"], 60, 60);
    expect((await read(u.userId)).body.ledgerWindow).toEqual(bruteForceWindow(generated, 60));
  });

  it("ingests idempotently by the platform's ids", async () => {
    const again = await ingestEntries(t, entries.slice(0, 200));
    expect(again).toEqual({ inserted: 0, duplicates: 200 });
    await grant(trader.userId, ["ledger"], 365, 365);
    expect((await read(trader.userId)).body.ledgerWindow).toEqual(bruteForceWindow(entries, 365));
  });
});

describe("what is never provided", () => {
  it("puts no transaction, counterparty, account number, BVN, NIN, location, device id or message in any response", async () => {
    await grant(trader.userId, [...scopes]);
    const bodies = [
      JSON.stringify((await read(trader.userId)).body),
      JSON.stringify((await read(trader.userId, "?ledger_window_days=365")).body),
    ];
    const forbiddenKeys =
      /^(transactions?|entries|counterpart(y|ies)(Id|Name)?s?|accountNumber|bvn|nin|latitude|longitude|location|gps|deviceId|device|transcript|messages?|phoneNumber)$/i;
    for (const text of bodies) {
      JSON.parse(text, (key, value) => {
        expect(forbiddenKeys.test(key), key).toBe(false);
        return value;
      });
      for (const e of entries) expect(text).not.toContain(e.counterpartyId);
      expect(text).not.toContain(trader.phoneNumber);
      expect(text).not.toContain(trader.phoneNumber.slice(1));
    }
  });
});

describe("tier changes", () => {
  let receiver: TestReceiver;
  afterAll(() => receiver?.close());

  it("emits standing.tier_changed to partners holding an active consent with scope standing, and only them", async () => {
    receiver = await startReceiver();
    const u = await createUser(t);
    const other = await createPartner(t);
    await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["standing.*"] });
    await createWebhook(t.partnerUrl, other.sandboxKey, { url: receiver.url, events: ["standing.*"] });
    await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: other.partnerId,
      scopes: ["kyc"],
      ledgerWindowDays: 30,
    });
    const update = (tier: string, score: number, at: number) => ({
      userId: u.userId,
      tier,
      score,
      scoreVersion: "v3",
      asOf: timestampFromDate(new Date(Date.now() + at)),
    });
    expect(await t.internal.ingest.upsertStanding({ updates: [update("Emerging", 300, 0)] })).toMatchObject({
      tierChanges: 0,
    });
    expect(await t.internal.ingest.upsertStanding({ updates: [update("Trusted", 900, 1)] })).toMatchObject({
      tierChanges: 1,
    });
    const got = await eventually(() =>
      receiver.received.find((r) => JSON.parse(r.body).payload.userId === u.userId),
    );
    expect(JSON.parse(got.body).payload).toMatchObject({
      previousTier: "Emerging",
      tier: "Trusted",
      direction: "UP",
      score: 900,
    });
    const events = await sql<{ partner_id: string }>(
      t.app.orm.em.fork(),
      "select partner_id from events where type = 'standing.tier_changed' and body like $1",
      [`%${u.userId}%`],
    );
    expect(events.map((e) => e.partner_id)).toEqual([p.partnerId]);
    // A late, older update changes nothing.
    expect(
      await t.internal.ingest.upsertStanding({ updates: [update("Unrated", 10, -60_000)] }),
    ).toMatchObject({ updated: 0 });
  });
});
