import type { DisbursementService, PastLoan } from "../disbursements/disbursement.service.ts";
import type { LedgerEntryInput, LedgerService } from "../ledger/ledger.service.ts";
import { DEFAULT_TERMS, type PartnerService } from "../partners/partner.service.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import { FIXTURE_LENDER_ID } from "../platform/tenancy.ts";
import type { StandingService } from "../standing/standing.service.ts";
import type { UserService } from "../users/user.service.ts";
import { type FixtureUser, fixtureUsers } from "./fixture-users.ts";
import { sandboxRepository } from "./sandbox.repository.ts";

/** Bump when the fixtures change: every deployment then re-seeds their standing, KYC and loans once. */
export const FIXTURE_VERSION = 1;

export { type FixtureUser, fixtureUsers } from "./fixture-users.ts";

/** 32-bit FNV-1a: the seed of a user-day's generator, so a day's entries are the same whenever generated. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** mulberry32: a small deterministic generator (not for secrets). */
function generator(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** One user's ledger entries for one UTC day (`YYYY-MM-DD`), deterministic. */
export function fixtureDay(user: FixtureUser, day: string): LedgerEntryInput[] {
  const rand = generator(fnv1a(`${user.id}:${day}`));
  const between = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const naira = (lo: number, hi: number) => BigInt(between(lo, hi)) * 100n;
  const date = new Date(`${day}T00:00:00Z`);
  const weekday = date.getUTCDay();
  const entries: LedgerEntryInput[] = [];
  const add = (direction: "IN" | "OUT", amountKobo: bigint, counterparty: string, channel: string) => {
    const n = entries.length;
    entries.push({
      id: `fixture:${user.id}:${day}:${n}`,
      userId: user.id,
      amountKobo,
      direction,
      counterpartyId: `fixture:${user.id}:${counterparty}`,
      channel,
      occurredAt: new Date(date.getTime() + (8 + ((n * 37) % 12)) * ms.hour + between(0, 59) * ms.minute),
    });
  };
  switch (user.profile) {
    case "trader": {
      if (weekday === 0 && rand() < 0.7) break; // most Sundays closed
      const sales = between(3, 9);
      for (let i = 0; i < sales; i++)
        add("IN", naira(1_500, 45_000), `customer${between(1, 60)}`, rand() < 0.5 ? "pos" : "transfer");
      if (rand() < 0.6) add("OUT", naira(20_000, 180_000), `supplier${between(1, 6)}`, "transfer");
      if (rand() < 0.4) add("OUT", naira(500, 8_000), `utility${between(1, 3)}`, "ussd");
      break;
    }
    case "salaried": {
      if (day.endsWith("-25")) add("IN", 42_000_000n, "employer", "transfer");
      const spends = between(0, 3);
      for (let i = 0; i < spends; i++)
        add("OUT", naira(1_000, 25_000), `merchant${between(1, 25)}`, rand() < 0.6 ? "card" : "transfer");
      if (day.endsWith("-01")) add("OUT", naira(120_000, 120_000), "landlord", "transfer");
      break;
    }
    case "gig": {
      if (rand() < 0.2) break; // a day off
      const jobs = between(2, 6);
      for (let i = 0; i < jobs; i++) add("IN", naira(1_200, 9_000), `platform${between(1, 3)}`, "wallet");
      if (rand() < 0.7) add("OUT", naira(2_000, 6_000), "fuel", "pos");
      if (rand() < 0.3) add("OUT", naira(1_000, 15_000), `merchant${between(1, 10)}`, "card");
      break;
    }
    case "light": {
      if (rand() < 0.75) break;
      add(rand() < 0.6 ? "IN" : "OUT", naira(500, 20_000), `contact${between(1, 8)}`, "transfer");
      break;
    }
  }
  return entries;
}

const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/** What {@link createSandboxFixtures} returns. */
export type SandboxFixtures = ReturnType<typeof createSandboxFixtures>;

/** What keeping the fixtures seeded needs. */
interface FixtureDeps {
  now: () => Date;
  users: UserService;
  partners: PartnerService;
  disbursements: DisbursementService;
  ledger: LedgerService;
  standing: StandingService;
  logger: Logger;
}

/**
 * Keeps the sandbox fixture users present and current: created on the first start (users, standing, KYC,
 * past loans from the fixture lender, a year of ledger), then the ledger topped up day by day so the last
 * 365 days are always full. Safe to run concurrently and any number of times: every write is idempotent.
 */
export function createSandboxFixtures(o: FixtureDeps) {
  return {
    ensure(em: Em): Promise<{ seeded: boolean; days: number }> {
      return ensureFixtures(o, em);
    },

    /**
     * Seeds the fixture users now, whatever was seeded before (`npm run cli -- sandbox seed`): their documented
     * profiles, standing and KYC written again, their past loans where missing, their ledger up to yesterday.
     */
    async reseed(em: Em): Promise<{ users: number; days: number }> {
      await seedPeople(o, em, o.now());
      const { days } = await this.ensure(em);
      o.logger.info("reseeded sandbox fixture users", { users: fixtureUsers.length, days });
      return { users: fixtureUsers.length, days };
    },
  };
}

/** Seeds the people on the first start or a new {@link FIXTURE_VERSION}, then the ledger through yesterday. */
async function ensureFixtures(o: FixtureDeps, em: Em): Promise<{ seeded: boolean; days: number }> {
  const now = o.now();
  const yesterday = utcDay(new Date(now.getTime() - ms.day));
  const state = await sandboxRepository.state(em, "users");
  if (state && state.version === FIXTURE_VERSION && state.seededThrough >= yesterday)
    return { seeded: false, days: 0 };
  const fresh = !state || state.version !== FIXTURE_VERSION;
  if (fresh) await seedPeople(o, em, now);
  // The ledger from the day after the last seeded one (a year back at most) through yesterday.
  const yearAgo = utcDay(new Date(now.getTime() - 365 * ms.day));
  const from = !fresh && state && state.seededThrough >= yearAgo ? nextDay(state.seededThrough) : yearAgo;
  let days = 0;
  let batch: LedgerEntryInput[] = [];
  for (let day = from; day <= yesterday; day = nextDay(day)) {
    for (const user of fixtureUsers) batch.push(...fixtureDay(user, day));
    days++;
    if (batch.length > 4_000) {
      await o.ledger.ingest(em, batch);
      batch = [];
    }
  }
  if (batch.length) await o.ledger.ingest(em, batch);
  await sandboxRepository.markSeeded(em, "users", FIXTURE_VERSION, yesterday);
  if (fresh) o.logger.info("seeded sandbox fixture users", { users: fixtureUsers.length, days });
  return { seeded: fresh, days };
}

/** The fixture users as documented: the users themselves, their standing and KYC, and their past loans. */
async function seedPeople(o: FixtureDeps, em: Em, now: Date): Promise<void> {
  for (const u of fixtureUsers) {
    try {
      await o.users.upsert(em, {
        id: u.id,
        phoneNumber: u.phoneNumber,
        segment: u.segment,
        createdAt: new Date(now.getTime() - u.joinedDaysAgo * ms.day),
        environment: "sandbox",
      });
    } catch (err) {
      // Another sandbox user already holds the number: the fixture keeps its id, without the phone.
      o.logger.warn("sandbox fixture user not created", { userId: u.id, err });
    }
  }
  const present = await o.users.existing(
    em,
    fixtureUsers.map((u) => u.id),
  );
  const users = fixtureUsers.filter((u) => present.has(u.id));
  await o.standing.upsertStanding(
    em,
    users.map((u) => standingOf(u, now)),
  );
  await o.standing.upsertKyc(
    em,
    users.map((u) => kycOf(u, now)),
  );
  await seedLoans(o, em, users, now);
}

/** A fixture user's standing: their documented tier and score, with signals that fit their profile. */
function standingOf(u: FixtureUser, now: Date) {
  return {
    userId: u.id,
    tier: u.tier,
    score: u.score,
    scoreVersion: "sandbox-1",
    standingSignals: {
      tenureDays: u.joinedDaysAgo,
      monthsInTier: Math.min(24, Math.floor(u.joinedDaysAgo / 60)),
      scoreChange90d: u.tier === "Trusted" ? 24 : u.tier === "Unrated" ? 0 : -8,
      disputesLast90d: u.loans.some((l) => l.installments.some(([, late]) => late === "default")) ? 1 : 0,
    },
    workSignals: {
      monthsActive: Math.floor(u.joinedDaysAgo / 30),
      activeDaysLast30d: u.profile === "light" ? 6 : u.profile === "salaried" ? 22 : 25,
      incomeRegularityBps: u.profile === "salaried" ? 9_600 : u.profile === "light" ? 1_800 : 7_200,
      employmentVerified: u.profile === "salaried",
    },
    asOf: now,
  };
}

/** A fixture user's KYC at their documented level, verified 300 days ago. */
function kycOf(u: FixtureUser, now: Date) {
  return {
    userId: u.id,
    level: u.kyc,
    bvnVerified: u.kyc === "FULL",
    ninVerified: u.kyc === "FULL",
    phoneVerified: u.kyc !== "NONE",
    addressVerified: u.kyc === "FULL",
    livenessChecked: u.kyc === "FULL",
    verifiedAt: u.kyc === "NONE" ? null : new Date(now.getTime() - 300 * ms.day),
  };
}

/** Past loans from the fixture lender, repaid, late or defaulted, so repayment history has something to show. */
async function seedLoans(o: FixtureDeps, em: Em, users: FixtureUser[], now: Date): Promise<void> {
  await em.transactional(async (tx) => {
    await o.partners.ensure(tx, {
      id: FIXTURE_LENDER_ID,
      name: "Sandbox fixture lender",
      feeRateBps: 0,
      createdAt: now,
      ...DEFAULT_TERMS,
    });
    for (const u of users) {
      for (const [n, loan] of u.loans.entries()) {
        await o.disbursements.recordPastLoan(tx, pastLoan(u, n, loan, now));
      }
    }
  });
}

/** The user's `n`-th past loan from the fixture lender, with fixed ids and its installments as documented. */
function pastLoan(u: FixtureUser, n: number, loan: FixtureUser["loans"][number], now: Date): PastLoan {
  const first = loan.installments[0]?.[0] ?? 30;
  const deliveredAt = new Date(now.getTime() - (first + 30) * ms.day);
  // A fixed id per user and loan: `dsb_` + 26 Crockford characters.
  const suffix = `${u.id
    .slice(4)
    .toUpperCase()
    .replace(/[ILOU]/g, "X")}${n}`
    .padEnd(26, "0")
    .slice(0, 26);
  const each = loan.principalKobo / BigInt(loan.installments.length);
  return {
    id: `dsb_${suffix}`,
    partnerId: FIXTURE_LENDER_ID,
    userId: u.id,
    principalKobo: loan.principalKobo,
    deliveredAt,
    installments: loan.installments.map(([daysAgo, late], seq) => {
      const dueDate = utcDay(new Date(now.getTime() - daysAgo * ms.day));
      // Debited at 07:00 UTC on the due day (plus a day per day late), whatever the time is now: a
      // time of day carried over from `now` would make an on-time repayment late after 17:00.
      const due = new Date(`${dueDate}T00:00:00Z`);
      const collected = late === "default" ? null : new Date(due.getTime() + late * ms.day + 7 * ms.hour);
      return {
        id: `rpy_${suffix}_${seq + 1}`,
        dueDate,
        amountKobo: each,
        collectedAt: collected,
        // The first debit and a daily retry for each day late; a default used all four.
        attempts: collected ? 1 + Number(late) : 4,
        lastFailure: collected && late === 0 ? null : "insufficient_funds",
        failedAt: collected ? null : new Date(due.getTime() + 3 * ms.day),
      };
    }),
  };
}

function nextDay(day: string): string {
  return utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + ms.day));
}
