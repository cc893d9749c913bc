import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scopes } from "../../src/consent/scopes.ts";
import { sealedColumns } from "../../src/master-key.ts";
import { dataKeyLabels, MasterKeyMismatchError } from "../../src/platform/crypto/data-keys.ts";
import { createSecretBox } from "../../src/platform/crypto/secret-box.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createSnapshotVerifier } from "../../src/sdk/snapshots.ts";
import { verifyWebhookSignature } from "../../src/sdk/webhooks.ts";
import { createWebhook } from "../factories/events.ts";
import { type GeneratedEntry, ingestEntries } from "../factories/ledger.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createTestDatabase } from "../support/db.ts";
import { PROCESS_TEST_TIMEOUT_MS, runScript } from "../support/process.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";

// A master key rotation as docs/operations.md tells an operator to do it, on one database: data sealed
// under the old key, an instance with the new key that still accepts the old one, `npm run db:rekey`, then
// an instance with the new key alone. Everything a partner relies on must hold at every step.
const oldKey = randomBytes(32);
const newKey = randomBytes(32);
let databaseUrl: string;
let t: TestApp | undefined;
let receiver: TestReceiver;
let p: PartnerFixture;
let hook: { id: string; secret: string };
let userId: string;
let linkId: string;
const idempotencyKey = `rotation-${randomBytes(4).toString("hex")}`;
let firstCreate: { status: number; body: string };

const start = async (masterKey: Buffer, acceptedMasterKeys: Buffer[] = []) => {
  await t?.stop();
  t = undefined;
  t = await startTestApp({ databaseUrl, masterKey, acceptedMasterKeys });
  return t;
};
const app = () => {
  if (!t) throw new Error("no instance running");
  return t;
};
const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(`${app().partnerUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${p.sandboxKey}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
};
const entries = (parties: string[]): GeneratedEntry[] =>
  parties.map((party) => ({
    id: `le_${randomBytes(6).toString("hex")}`,
    userId,
    amountKobo: 10_000n,
    direction: "IN",
    counterpartyId: party,
    occurredAt: new Date(Date.now() - 86_400_000),
  }));
const rekey = (args: string[], masterKey: Buffer, accepted: Buffer[]) =>
  runScript("src/cli/rekey.ts", ["--json", ...args], {
    DATABASE_URL: databaseUrl,
    MASTER_KEY: masterKey.toString("hex"),
    MASTER_KEYS_ACCEPTED: accepted.map((k) => k.toString("base64")).join(","),
    INTERNAL_TOKEN: `itk_${randomBytes(24).toString("base64url")}`,
  });

/** What a partner relies on, checked against whichever instance is running. */
async function everythingStillWorks(expectedParties: number) {
  // Snapshots are signed with the private key sealed at the start, and verify against the published key.
  const snapshot = await call("GET", `/partner/v1/users/${userId}/snapshot?ledger_window_days=30`);
  expect(snapshot.status).toBe(200);
  const verifier = createSnapshotVerifier({
    baseUrl: app().partnerUrl,
    apiKey: p.sandboxKey,
    environment: "sandbox",
  });
  await verifier.verify(snapshot.text);
  // Counterparty hashes still match: a known counterparty is not counted again.
  expect(JSON.parse(snapshot.text).ledgerWindow.inflow.distinctCounterparties).toBe(expectedParties);
  // Deliveries are signed with the subscription's secret, as the partner holds it.
  const before = receiver.received.length;
  expect((await call("POST", `/partner/v1/webhooks/${hook.id}/test`, {})).status).toBe(200);
  const [delivery] = (await receiver.waitFor(before + 1)).slice(before);
  await verifyWebhookSignature({
    payload: delivery?.body ?? "",
    signatureHeader: delivery?.headers["x-service-signature"],
    secret: hook.secret,
  });
  // The stored response of an idempotent write is replayed as it was first answered.
  const replay = await call(
    "POST",
    "/partner/v1/webhooks",
    { url: receiver.url, events: ["consent.*"] },
    {
      "idempotency-key": idempotencyKey,
    },
  );
  expect(replay.status).toBe(firstCreate.status);
  expect(replay.headers.get("idempotent-replayed")).toBe("true");
  expect(replay.text).toBe(firstCreate.body);
  // The consent link still opens for the person it was sent to.
  const link = JSON.parse((await call("GET", `/partner/v1/consent-links/${linkId}`)).text);
  const page = await fetch(link.url);
  expect(page.status).toBe(200);
  await page.text();
  // The payment instruments the platform sent are readable for payouts.
  const instruments = await app().app.services.instruments.get(app().app.orm.em.fork(), userId);
  expect(instruments.bankRecipientCode).toBe("RCP_rotation");
}

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  receiver = await startReceiver();
  await start(oldKey);
  p = await createPartner(app());
  hook = await createWebhook(app().partnerUrl, p.sandboxKey, { url: receiver.url, events: ["consent.*"] });
  ({ userId } = await createUser(app()));
  await ingestEntries(app(), entries(["cp-a", "cp-b"]));
  await app().internal.consents.grantConsent({
    userId,
    partnerId: p.partnerId,
    scopes: [...scopes],
    ledgerWindowDays: 90,
    maxLedgerWindowDays: 365,
  });
  const other = await createUser(app());
  const link = await call("POST", "/partner/v1/consent-links", {
    phoneNumber: other.phoneNumber,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  expect(link.status).toBe(200);
  linkId = JSON.parse(link.text).id;
  await app().internal.users.setPaymentInstruments({ userId, bankRecipientCode: "RCP_rotation" });
  const created = await call(
    "POST",
    "/partner/v1/webhooks",
    { url: receiver.url, events: ["consent.*"] },
    {
      "idempotency-key": idempotencyKey,
    },
  );
  firstCreate = { status: created.status, body: created.text };
  expect(created.status).toBe(200);
});

afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

describe("rotating the master key", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("works on the old key alone, as before", async () => {
    await everythingStillWorks(2);
  });

  it("works with the new key while the old one is still accepted, and keeps counterparties apart", async () => {
    await start(newKey, [oldKey]);
    await ingestEntries(app(), entries(["cp-a", "cp-c"]));
    await everythingStillWorks(3);
  });

  it("re-seals every stored secret under the new key with db:rekey, and says when nothing is left", async () => {
    const check = await rekey(["--check"], newKey, [oldKey]);
    expect(check.code).toBe(1);
    const before = JSON.parse(check.stdout);
    expect(before.remaining).toBeGreaterThan(0);
    // Everything sealed before the switch is found: keys, secrets, phones, links, instruments, responses.
    const outdated = new Set(
      (before.columns as { table: string; column: string; remaining: number }[])
        .filter((c) => c.remaining > 0)
        .map((c) => `${c.table}.${c.column}`),
    );
    for (const c of [
      "data_keys.key_enc",
      "signing_keys.private_key_enc",
      "webhooks.secret_enc",
      "users.phone_enc",
      "consent_links.token_enc",
      "payment_instruments.sealed",
      "idempotency_keys.response",
    ])
      expect(outdated).toContain(c);

    const run = await rekey([], newKey, [oldKey]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ resealed: before.remaining, remaining: 0 });
    const after = await rekey(["--check"], newKey, []);
    expect(after.code).toBe(0);
    expect(JSON.parse(after.stdout).remaining).toBe(0);
    // A second run finds nothing to do.
    expect(JSON.parse((await rekey([], newKey, [])).stdout)).toMatchObject({ resealed: 0, remaining: 0 });
  }, 120_000); // four runs of db:rekey, each a Node process of its own

  it("works on the new key alone once re-sealed", async () => {
    await start(newKey);
    await ingestEntries(app(), entries(["cp-b", "cp-d"]));
    await everythingStillWorks(4);
  });

  it("refuses to start with the old key, or any other, once it is retired", async () => {
    await t?.stop();
    t = undefined;
    await expect(startTestApp({ databaseUrl, masterKey: oldKey })).rejects.toBeInstanceOf(
      MasterKeyMismatchError,
    );
    await expect(startTestApp({ databaseUrl, masterKey: randomBytes(32) })).rejects.toBeInstanceOf(
      MasterKeyMismatchError,
    );
    // Nothing was sealed by the refused starts: the right key still opens everything.
    await start(newKey);
    await everythingStillWorks(4);
  });

  it("reports what no key given can open, and leaves it as it is", async () => {
    // A value from a key nobody has any more (restored from an old backup, say).
    const stray = randomBytes(32);
    const sealed = createSecretBox(stray).seal(Buffer.from("RCP_lost"), `payment-instruments:${userId}`);
    await sql(app().app.orm.em.fork(), "update payment_instruments set sealed = $1 where user_id = $2", [
      sealed,
      userId,
    ]);
    const run = await rekey([], newKey, []);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout).columns).toContainEqual({
      table: "payment_instruments",
      column: "sealed",
      resealed: 0,
      remaining: 1,
    });
    const [row] = await sql<{ sealed: Buffer }>(
      app().app.orm.em.fork(),
      "select sealed from payment_instruments where user_id = $1",
      [userId],
    );
    expect(row?.sealed.equals(sealed)).toBe(true);
  });
});

describe("a database from before the data keys were kept", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("is checked against something else it holds before a wrong key may create them", async () => {
    const key = randomBytes(32);
    const url = await createTestDatabase();
    const first = await startTestApp({ databaseUrl: url, masterKey: key });
    const keysBefore = await sql<{ label: string }>(first.app.orm.em.fork(), "select label from data_keys");
    expect(keysBefore.map((k) => k.label).sort()).toEqual([...dataKeyLabels].sort());
    await sql(first.app.orm.em.fork(), "delete from data_keys");
    await first.stop();

    await expect(startTestApp({ databaseUrl: url, masterKey: randomBytes(32) })).rejects.toBeInstanceOf(
      MasterKeyMismatchError,
    );
    const again = await startTestApp({ databaseUrl: url, masterKey: key });
    try {
      const rows = await sql<{ key_enc: Buffer }>(again.app.orm.em.fork(), "select key_enc from data_keys");
      expect(rows.length).toBe(dataKeyLabels.length);
      // Sealed by the right key, not by the refused one.
      for (const r of rows)
        expect(r.key_enc.subarray(0, 9).equals(createSecretBox(key).currentPrefix)).toBe(true);
    } finally {
      await again.stop();
    }
  });
});

describe("the list of sealed columns", () => {
  it("covers every bytea column of the schema that is not a hash or a public key", async () => {
    const db = await startTestApp({ config: { role: "api" } });
    try {
      const columns = await sql<{ name: string }>(
        db.app.orm.em.fork(),
        `select table_name || '.' || column_name as name from information_schema.columns
          where table_schema = 'public' and data_type = 'bytea' order by 1`,
      );
      const notSecret = new Set([
        "api_keys.key_hash",
        "consents.terms_hash",
        "disbursements.acceptance_terms_hash",
        "disbursements.acceptance_token_hash",
        "person_codes.code_hash",
        "person_codes.phone_hash",
        "prompt_sessions.token_hash",
        "consent_links.phone_hash",
        "consent_links.token_hash",
        "idempotency_keys.request_hash",
        "ledger_counterparties.counterparty_hash",
        "ledger_entries.counterparty_hash",
        "signing_keys.public_key",
        "users.phone_hash",
        "portal_invites.token_hash",
        "portal_members.recovery_hashes",
        "portal_sessions.token_hash",
        "portal_signin_throttles.email_hash",
      ]);
      const sealed = new Set(sealedColumns.map((c) => `${c.table}.${c.column}`));
      expect(columns.map((c) => c.name).filter((n) => !notSecret.has(n) && !sealed.has(n))).toEqual([]);
      expect([...sealed].filter((n) => !columns.some((c) => c.name === n))).toEqual([]);
    } finally {
      await db.stop();
    }
  });
});
