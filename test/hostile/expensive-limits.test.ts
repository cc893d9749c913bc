import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Disbursement_Destination } from "../../gen/partner/v1/disbursements_pb.ts";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { lagosDay, lagosDayStart } from "../../src/platform/dates.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartnerClient, PartnerApiError } from "../../src/sdk/index.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser, createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, type RestResponse, rest } from "../support/clients.ts";
import { eventually } from "../support/wait.ts";

// A partner that pays for one API key tries to take more than its share of the expensive work: many snapshot
// reads at once, many loans for one person in a day. Small limits, so the test counts requests, not load.
const READS = 2;
const PER_DAY = 3;

// 21:00 in Lagos today (20:00 UTC): three hours to the next Lagos midnight.
const clock = new ManualClock(lagosDayStart(new Date()).getTime() + 21 * ms.hour);

let t: TestApp;
let p: PartnerFixture;
let q: PartnerFixture;
/** A connection of the test's own, outside the service's pool, that holds `consents` locked when asked. */
let locker: pg.Client;

beforeAll(async () => {
  t = await startTestApp({
    clock,
    config: {
      rateLimits: {
        read: { capacity: 10_000, refillPerSecond: 10_000 },
        write: { capacity: 10_000, refillPerSecond: 10_000 },
      },
      expensiveLimits: { snapshotConcurrencyPerKey: READS, disbursementsPerUserPerDay: PER_DAY },
    },
  });
  p = await createPartner(t);
  q = await createPartner(t);
  locker = new pg.Client({ connectionString: t.databaseUrl });
  await locker.connect();
});
afterAll(async () => {
  await locker?.end();
  await t?.stop();
});

// ---- snapshot reads in flight ----

const inFlight = (keyId: string) => t.app.services.snapshotReads.inFlight(keyId);
const snapshot = (key: string, userId: string, query = "") =>
  rest(t.partnerUrl, "GET", `/partner/v1/users/${userId}/snapshot${query}`, { key });

/**
 * Runs `during` while `consents` is locked ACCESS EXCLUSIVE: every snapshot read that reaches the database
 * waits there, holding its slot, until the lock goes (always, even if `during` fails).
 */
async function withConsentsLocked<T>(during: () => Promise<T>): Promise<T> {
  await locker.query("begin");
  await locker.query("lock table consents in access exclusive mode");
  try {
    return await during();
  } finally {
    await locker.query("commit");
  }
}

/** Exactly READS slots are free: READS reads get in (and wait at the database), the next is refused. */
async function expectAllSlotsFree(keyId: string, key: string, userId: string): Promise<void> {
  expect(inFlight(keyId)).toBe(0);
  const held = await withConsentsLocked(async () => {
    const reads = Array.from({ length: READS }, () => snapshot(key, userId));
    await eventually(() => inFlight(keyId) === READS, { what: `${READS} reads in flight` });
    expect((await snapshot(key, userId)).status).toBe(429);
    return reads;
  });
  expect((await Promise.all(held)).map((r) => r.status)).toEqual(Array(READS).fill(200));
  await eventually(() => inFlight(keyId) === 0, { what: "every slot given back" });
}

describe("snapshot reads in flight per API key", () => {
  it("past the limit, answers 429 too_many_concurrent_reads with Retry-After: 1 on every face; the reads in flight and other keys are served", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    const live = await createConsentedUser(t, p.partnerId, { environment: "production" });
    expect((await snapshot(p.sandboxKey, u.userId)).status).toBe(200);
    let other: Promise<RestResponse> | undefined;
    const held = await withConsentsLocked(async () => {
      const reads = Array.from({ length: READS }, () => snapshot(p.sandboxKey, u.userId));
      await eventually(() => inFlight(p.sandboxKeyId) === READS, { what: `${READS} reads in flight` });
      const refused = await Promise.all(Array.from({ length: 3 }, () => snapshot(p.sandboxKey, u.userId)));
      for (const r of refused) {
        expect(r.status).toBe(429);
        expect(r.body).toMatchObject({
          code: "too_many_concurrent_reads",
          requestId: expect.stringMatching(/^req_/),
          details: { limit: READS },
        });
        expect(r.headers.get("retry-after")).toBe("1");
      }
      const err = await connectClient(SnapshotService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
        .getSnapshot({ userId: u.userId })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
      expect(errorInfoOf(err)?.reason).toBe("too_many_concurrent_reads");
      expect((err as ConnectError).metadata.get("retry-after")).toBe("1");
      // The limit is the key's: the partner's other key gets in meanwhile (and waits at the database too).
      other = snapshot(p.liveKey, live.userId);
      await eventually(() => inFlight(p.liveKeyId) === 1, { what: "the other key's read in flight" });
      expect(inFlight(p.sandboxKeyId)).toBe(READS);
      return reads;
    });
    expect((await Promise.all(held)).map((r) => r.status)).toEqual(Array(READS).fill(200));
    expect((await other)?.status).toBe(200);
    await eventually(() => inFlight(p.sandboxKeyId) + inFlight(p.liveKeyId) === 0, { what: "slots back" });
    expect((await snapshot(p.sandboxKey, u.userId)).status).toBe(200);
    const text = await (
      await fetch(`${t.internalUrl}/metrics`, { headers: { authorization: `Bearer ${t.internalToken}` } })
    ).text();
    expect(text).toMatch(/expensive_limit_rejections_total\{limit="snapshot_concurrency"\} [1-9]/);
  });

  it("gives every slot back however the read ends: consent refusals, bad windows, a database error, a client gone", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    const stranger = await createUser(t); // no consent for anyone
    // Refusals, one after another, many more than the limit: each gives its slot back.
    for (let i = 0; i < 3 * READS; i++) {
      const refused = await snapshot(p.sandboxKey, stranger.userId);
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe("consent_required");
      const bad = await snapshot(p.sandboxKey, u.userId, "?ledger_window_days=0");
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe("invalid_ledger_window");
    }
    expect(inFlight(p.sandboxKeyId)).toBe(0);

    // Refusals that were in flight together, at the limit.
    const refusals = await withConsentsLocked(async () => {
      const reads = Array.from({ length: READS }, () => snapshot(p.sandboxKey, stranger.userId));
      await eventually(() => inFlight(p.sandboxKeyId) === READS, { what: `${READS} reads in flight` });
      return reads;
    });
    expect((await Promise.all(refusals)).map((r) => r.body.code)).toEqual(
      Array(READS).fill("consent_required"),
    );
    await eventually(() => inFlight(p.sandboxKeyId) === 0, { what: "slots back after refusals" });

    // A database error: the waiting statements are cancelled (503 unavailable, nothing committed).
    const cancelled = await withConsentsLocked(async () => {
      const reads = Array.from({ length: READS }, () => snapshot(p.sandboxKey, u.userId));
      await eventually(() => inFlight(p.sandboxKeyId) === READS, { what: `${READS} reads in flight` });
      const waiting = `from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'
          and query ilike '%from consents%'`;
      await eventually(async () => (await locker.query(`select pid ${waiting}`)).rows.length >= READS, {
        what: "the reads waiting at the database",
      });
      await locker.query(`select pg_cancel_backend(pid) ${waiting}`);
      return Promise.all(reads);
    });
    expect(cancelled.map((r) => r.status)).toEqual(Array(READS).fill(503));
    await eventually(() => inFlight(p.sandboxKeyId) === 0, { what: "slots back after errors" });

    // Clients that go away while their reads wait: the slot follows the work, not the connection, so it is
    // held until the read's work ends, then given back.
    await withConsentsLocked(async () => {
      const aborts = Array.from({ length: READS }, () => new AbortController());
      const gone = aborts.map((a) =>
        fetch(`${t.partnerUrl}/partner/v1/users/${u.userId}/snapshot`, {
          headers: { authorization: `Bearer ${p.sandboxKey}` },
          signal: a.signal,
        }).catch((e: unknown) => e),
      );
      await eventually(() => inFlight(p.sandboxKeyId) === READS, { what: `${READS} reads in flight` });
      for (const a of aborts) a.abort();
      for (const e of await Promise.all(gone)) expect((e as Error).name).toBe("AbortError");
      expect((await snapshot(p.sandboxKey, u.userId)).status).toBe(429);
    });
    await eventually(() => inFlight(p.sandboxKeyId) === 0, { what: "slots back after clients left" });

    // After all of it, exactly READS slots, no fewer.
    await expectAllSlotsFree(p.sandboxKeyId, p.sandboxKey, u.userId);
  });
});

// ---- disbursements per user per Lagos day ----

const day = (n: number) => lagosDay(new Date(clock.now().getTime() + n * ms.day));
let n = 0;
const offer = (key: string, userId: string, idempotencyKey = `daily-${++n}`, reference = idempotencyKey) =>
  rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key,
    headers: { "idempotency-key": idempotencyKey },
    body: {
      userId,
      principalKobo: "1000000",
      destination: "WALLET",
      reference,
      repaymentSchedule: {
        installments: [
          { dueDate: day(30), amountKobo: "600000" },
          { dueDate: day(60), amountKobo: "600000" },
        ],
      },
    },
  });
const createdFor = async (partnerId: string, userId: string) =>
  (
    await sql(t.app.orm.em.fork(), "select id from disbursements where partner_id = $1 and user_id = $2", [
      partnerId,
      userId,
    ])
  ).length;
/** Seconds from the test clock to the next midnight in Lagos. */
const toMidnight = () => (lagosDayStart(clock.now()).getTime() + ms.day - clock.now().getTime()) / 1000;

describe("disbursements per user per Lagos day", () => {
  it("refuses the (M+1)-th for one user with 429 user_daily_disbursement_limit and a Retry-After to Lagos midnight; replays, other users and other partners go on", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: q.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const first = await offer(p.sandboxKey, u.userId, "daily-first");
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    for (let i = 1; i < PER_DAY; i++) expect((await offer(p.sandboxKey, u.userId)).status).toBe(200);

    const refused = await offer(p.sandboxKey, u.userId);
    expect(refused.status).toBe(429);
    const midnight = new Date(lagosDayStart(clock.now()).getTime() + ms.day);
    expect(refused.body).toMatchObject({
      code: "user_daily_disbursement_limit",
      requestId: expect.stringMatching(/^req_/),
      details: { limit: PER_DAY, resetsAt: midnight.toISOString() },
    });
    expect(toMidnight()).toBe(3 * 3600);
    expect(refused.headers.get("retry-after")).toBe(String(3 * 3600));
    expect(await createdFor(p.partnerId, u.userId)).toBe(PER_DAY);
    expect(
      await t.app.services.metrics.expensiveLimitRejections.get({ limit: "user_daily_disbursements" }),
    ).toBeGreaterThan(0);

    // The first create, replayed with its key and body: the stored answer, not a 429.
    const replay = await offer(p.sandboxKey, u.userId, "daily-first");
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.id).toBe(first.body.id);

    // Another user of the same partner, and the same user with another partner, are not limited by it.
    const v = await createConsentedUser(t, p.partnerId);
    expect((await offer(p.sandboxKey, v.userId)).status).toBe(200);
    for (let i = 0; i < PER_DAY; i++) expect((await offer(q.sandboxKey, u.userId)).status).toBe(200);
    expect((await offer(q.sandboxKey, u.userId)).status).toBe(429);
    expect(await createdFor(q.partnerId, u.userId)).toBe(PER_DAY);
    expect(await createdFor(p.partnerId, u.userId)).toBe(PER_DAY);
  });

  it("the SDK's client does not wait hours for a retry: the 429 reaches the caller at once", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    for (let i = 0; i < PER_DAY; i++) expect((await offer(p.sandboxKey, u.userId)).status).toBe(200);
    const waits: number[] = [];
    const api = createPartnerClient({
      baseUrl: t.partnerUrl,
      apiKey: p.sandboxKey,
      sleep: async (wait) => {
        waits.push(wait);
      },
    });
    const err = await api.disbursements
      .createDisbursement({
        userId: u.userId,
        principalKobo: 1_000_000n,
        destination: Disbursement_Destination.WALLET,
        reference: `sdk-${++n}`,
        repaymentSchedule: { installments: [{ dueDate: day(30), amountKobo: 1_100_000n }] },
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PartnerApiError);
    expect(err).toMatchObject({
      status: 429,
      code: "user_daily_disbursement_limit",
      retryAfterSeconds: toMidnight(),
    });
    expect(waits).toEqual([]);
  });

  it("counts the day in Lagos: one second before its midnight Retry-After is 1, at midnight (23:00 UTC) the count starts again", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    clock.set(lagosDayStart(clock.now()).getTime() + ms.day - ms.second);
    for (let i = 0; i < PER_DAY; i++) expect((await offer(p.sandboxKey, u.userId)).status).toBe(200);
    const refused = await offer(p.sandboxKey, u.userId);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    clock.advance(ms.second);
    expect(clock.now().toISOString()).toMatch(/T23:00:00\.000Z$/); // still yesterday in UTC
    for (let i = 0; i < PER_DAY; i++) expect((await offer(p.sandboxKey, u.userId)).status).toBe(200);
    expect((await offer(p.sandboxKey, u.userId)).status).toBe(429);
    expect(await createdFor(p.partnerId, u.userId)).toBe(2 * PER_DAY);
  });

  it("of many concurrent creates for one user, admits exactly the limit", async () => {
    for (let round = 0; round < 3; round++) {
      const u = await createConsentedUser(t, p.partnerId);
      const answers = await Promise.all(Array.from({ length: 12 }, () => offer(p.sandboxKey, u.userId)));
      const tally: Record<number, number> = {};
      for (const a of answers) tally[a.status] = (tally[a.status] ?? 0) + 1;
      expect(tally).toEqual({ 200: PER_DAY, 429: 12 - PER_DAY });
      for (const a of answers.filter((x) => x.status === 429))
        expect(a.body.code).toBe("user_daily_disbursement_limit");
      expect(await createdFor(p.partnerId, u.userId)).toBe(PER_DAY);
    }
  });
});
