import type { ConsentService } from "../consent/consent.service.ts";
import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { validationFailed } from "../platform/errors.ts";
import type { UserService } from "../users/user.service.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { StandingSignals, WorkSignals } from "./standing.entity.ts";
import { standingRepository as repo } from "./standing.repository.ts";

/** Tiers, lowest first (CONTRACT.md §3); the index is `tierRank`. */
export const tiers = ["Unrated", "Emerging", "Established", "Trusted"] as const;
/** A standing tier. */
export type Tier = (typeof tiers)[number];

/** Standing signals as stored. */
export type StandingSignalsData = StandingSignals;
/** Work signals as stored. */
export type WorkSignalsData = WorkSignals;

/** One user's standing as the platform sends it. */
export interface StandingInput {
  userId: string;
  tier: string;
  score: number;
  scoreVersion: string;
  standingSignals: StandingSignalsData;
  workSignals: WorkSignalsData;
  asOf: Date;
}

/** KYC flags as the platform sends them. */
export interface KycInput {
  userId: string;
  level: string;
  bvnVerified: boolean;
  ninVerified: boolean;
  phoneVerified: boolean;
  addressVerified: boolean;
  livenessChecked: boolean;
  verifiedAt: Date | null;
}

const MAX_BATCH = 1_000;

/** What {@link createStandingService} is built from. */
export interface StandingServiceOptions {
  clock: Clock;
  outbox: Outbox;
  users: UserService;
  consents: ConsentService;
}

/** What {@link createStandingService} returns. */
export type StandingService = ReturnType<typeof createStandingService>;

/** A tier change, told as the `standing.tier_changed` event's direction. */
const direction = (previous: Tier, tier: Tier) =>
  tiers.indexOf(tier) > tiers.indexOf(previous) ? "UP" : "DOWN";

/** Refuses a batch of standings with any bad field, naming the first. */
function checkStandings(updates: StandingInput[]): void {
  if (updates.length > MAX_BATCH) throw validationFailed({ updates: `at most ${MAX_BATCH} per call` });
  updates.forEach((u, i) => {
    if (!(tiers as readonly string[]).includes(u.tier))
      throw validationFailed({ [`updates[${i}].tier`]: `must be one of ${tiers.join(", ")}` });
    if (!Number.isInteger(u.score) || u.score < 0 || u.score > 1000)
      throw validationFailed({ [`updates[${i}].score`]: "must be 0 to 1000" });
    if (u.scoreVersion === "" || u.scoreVersion.length > 64)
      throw validationFailed({ [`updates[${i}].scoreVersion`]: "is required (up to 64 characters)" });
    const bps = u.workSignals.incomeRegularityBps;
    if (bps !== null && (bps < 0 || bps > 10_000))
      throw validationFailed({ [`updates[${i}].incomeRegularityBps`]: "must be 0 to 10000" });
  });
}

/** A stored standing whose tier an update changed. */
interface TierChange {
  input: StandingInput;
  previous: Tier;
}

/** Writes the standings of a checked batch in `tx`, skipping any older than what is stored. */
async function writeStandings(tx: Em, updates: StandingInput[], now: Date) {
  const ids = updates.map((u) => u.userId);
  // Plain copies: writing a standing updates the entity it was read into.
  const before = new Map(
    (await repo.lockStandings(tx, ids)).map((r) => [r.userId, { tier: r.tier, asOf: r.asOf }]),
  );
  let updated = 0;
  const changes: TierChange[] = [];
  for (const u of updates) {
    const prior = before.get(u.userId);
    // An update older than what is stored (a retry arriving late) changes nothing.
    if (prior && prior.asOf > u.asOf) continue;
    const row = {
      userId: u.userId,
      tier: u.tier as Tier,
      score: u.score,
      scoreVersion: u.scoreVersion,
      standingSignals: u.standingSignals,
      workSignals: u.workSignals,
      asOf: u.asOf,
      updatedAt: now,
    };
    await repo.putStanding(tx, row);
    updated++;
    if (prior && prior.tier !== u.tier) changes.push({ input: u, previous: prior.tier });
    before.set(u.userId, { tier: row.tier, asOf: row.asOf });
  }
  return { updated, changes };
}

/** CONTRACT.md §5: each partner holding an ACTIVE consent with scope `standing` hears of a tier change. */
async function tellTierChanges({ outbox, consents }: StandingServiceOptions, tx: Em, changes: TierChange[]) {
  for (const { input, previous } of changes) {
    const holders = await consents.holders(tx, input.userId, "standing");
    for (const h of holders) {
      await outbox.raise(tx, {
        partnerId: h.partnerId,
        environment: h.environment,
        type: "standing.tier_changed",
        subject: { userId: input.userId },
        payload: {
          userId: input.userId,
          previousTier: previous,
          tier: input.tier,
          direction: direction(previous, input.tier as Tier),
          score: input.score,
          changedAt: input.asOf.toISOString(),
        },
      });
    }
  }
}

/** See {@link createStandingService}'s `upsertStanding`. */
async function upsertStanding(
  o: StandingServiceOptions,
  em: Em,
  updates: StandingInput[],
): Promise<{ updated: number; tierChanges: number }> {
  checkStandings(updates);
  if (updates.length === 0) return { updated: 0, tierChanges: 0 };
  return em.transactional(async (tx) => {
    const now = o.clock.now();
    await o.users.assertExist(
      tx,
      updates.map((u) => u.userId),
    );
    const { updated, changes } = await writeStandings(tx, updates, now);
    await tellTierChanges(o, tx, changes);
    return { updated, tierChanges: changes.length };
  });
}

/** See {@link createStandingService}'s `rescoreInSandbox`. */
async function rescoreInSandbox(
  { clock, outbox, consents }: StandingServiceOptions,
  em: Em,
  partnerId: string,
  userId: string,
  tier: Tier,
  score: number,
): Promise<{ tierChanged: boolean }> {
  if (!Number.isInteger(score) || score < 0 || score > 1000)
    throw validationFailed({ score: "must be 0 to 1000" });
  return em.transactional(async (tx) => {
    const now = clock.now();
    const previous =
      (await repo.lockSandboxStanding(tx, partnerId, userId))?.tier ??
      (await repo.standing(tx, userId))?.tier ??
      "Unrated";
    await repo.putSandboxStanding(tx, {
      partnerId,
      environment: "sandbox",
      userId,
      tier,
      score,
      updatedAt: now,
    });
    if (previous === tier) return { tierChanged: false };
    const holders = await consents.holders(tx, userId, "standing");
    if (holders.some((h) => h.partnerId === partnerId && h.environment === "sandbox")) {
      await outbox.raise(tx, {
        partnerId,
        environment: "sandbox",
        type: "standing.tier_changed",
        subject: { userId },
        payload: {
          userId,
          previousTier: previous,
          tier,
          direction: direction(previous, tier),
          score,
          changedAt: now.toISOString(),
        },
      });
    }
    return { tierChanged: true };
  });
}

/** See {@link createStandingService}'s `upsertKyc`. */
async function upsertKyc(
  { clock, users }: StandingServiceOptions,
  em: Em,
  updates: KycInput[],
): Promise<number> {
  if (updates.length > MAX_BATCH) throw validationFailed({ updates: `at most ${MAX_BATCH} per call` });
  updates.forEach((u, i) => {
    if (!["NONE", "BASIC", "FULL"].includes(u.level))
      throw validationFailed({ [`updates[${i}].level`]: "must be NONE, BASIC or FULL" });
  });
  // A user sent twice in one batch: the later entry wins, as it would in two calls.
  const latest = [...new Map(updates.map((u) => [u.userId, u])).values()];
  if (latest.length === 0) return 0;
  await users.assertExist(
    em,
    latest.map((u) => u.userId),
  );
  return repo.putKyc(em, latest, clock.now());
}

/** Standing and KYC from the platform; a tier change is told to every partner entitled to know. */
export function createStandingService(o: StandingServiceOptions) {
  return {
    /**
     * Stores the platform's standings (a batch of up to 1000, in one transaction); a tier change is told to
     * every partner holding an ACTIVE consent with scope `standing`.
     */
    upsertStanding: (em: Em, updates: StandingInput[]) => upsertStanding(o, em, updates),

    /**
     * A sandbox partner re-scores a sandbox user (the standing helper): the new tier and score are the
     * partner's own copy of the user (CONTRACT.md §7), shown in its snapshots over the platform's standing and
     * seen by no other partner. A tier change is told to that partner alone, when it holds an ACTIVE consent
     * with scope `standing`, as the platform's re-score would be.
     */
    rescoreInSandbox: (em: Em, partnerId: string, userId: string, tier: Tier, score: number) =>
      rescoreInSandbox(o, em, partnerId, userId, tier, score),

    /** A partner's sandbox copies of the users are restored: its re-scores are forgotten. */
    resetSandbox(tx: Em, partnerId: string): Promise<number> {
      return repo.deleteSandboxStandings(tx, partnerId);
    },

    /** Stores the platform's KYC flags (a batch of up to 1000; a user sent twice: the later entry wins). */
    upsertKyc: (em: Em, updates: KycInput[]) => upsertKyc(o, em, updates),
  };
}
