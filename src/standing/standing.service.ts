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

/** What {@link createStandingService} returns. */
export type StandingService = ReturnType<typeof createStandingService>;

/** Standing and KYC from the platform; a tier change is told to every partner entitled to know. */
export function createStandingService({
  clock,
  outbox,
  users,
  consents,
}: {
  clock: Clock;
  outbox: Outbox;
  users: UserService;
  consents: ConsentService;
}) {
  return {
    async upsertStanding(
      em: Em,
      updates: StandingInput[],
    ): Promise<{ updated: number; tierChanges: number }> {
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
      if (updates.length === 0) return { updated: 0, tierChanges: 0 };
      return em.transactional(async (tx) => {
        const now = clock.now();
        const ids = updates.map((u) => u.userId);
        await users.assertExist(tx, ids);
        // Plain copies: writing a standing updates the entity it was read into.
        const before = new Map(
          (await repo.lockStandings(tx, ids)).map((r) => [r.userId, { tier: r.tier, asOf: r.asOf }]),
        );
        let updated = 0;
        const changes: { input: StandingInput; previous: Tier }[] = [];
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
        // CONTRACT.md §5: each partner holding an ACTIVE consent with scope `standing` hears of the change.
        for (const { input, previous } of changes) {
          const holders = await consents.holders(tx, input.userId, "standing");
          const direction = tiers.indexOf(input.tier as Tier) > tiers.indexOf(previous) ? "UP" : "DOWN";
          for (const h of holders) {
            await outbox.raise(tx, {
              partnerId: h.partnerId,
              environment: h.environment,
              type: "standing.tier_changed",
              payload: {
                userId: input.userId,
                previousTier: previous,
                tier: input.tier,
                direction,
                score: input.score,
                changedAt: input.asOf.toISOString(),
              },
            });
          }
        }
        return { updated, tierChanges: changes.length };
      });
    },

    /**
     * A sandbox partner re-scores a sandbox user (the standing helper): the new tier and score are the
     * partner's own copy of the user (CONTRACT.md §7), shown in its snapshots over the platform's standing and
     * seen by no other partner. A tier change is told to that partner alone, when it holds an ACTIVE consent
     * with scope `standing`, as the platform's re-score would be.
     */
    async rescoreInSandbox(
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
            payload: {
              userId,
              previousTier: previous,
              tier,
              direction: tiers.indexOf(tier) > tiers.indexOf(previous) ? "UP" : "DOWN",
              score,
              changedAt: now.toISOString(),
            },
          });
        }
        return { tierChanged: true };
      });
    },

    /** A partner's sandbox copies of the users are restored: its re-scores are forgotten. */
    resetSandbox(tx: Em, partnerId: string): Promise<number> {
      return repo.deleteSandboxStandings(tx, partnerId);
    },

    async upsertKyc(em: Em, updates: KycInput[]): Promise<number> {
      if (updates.length > MAX_BATCH) throw validationFailed({ updates: `at most ${MAX_BATCH} per call` });
      updates.forEach((u, i) => {
        if (!["NONE", "BASIC", "FULL"].includes(u.level))
          throw validationFailed({ [`updates[${i}].level`]: "must be NONE, BASIC or FULL" });
      });
      // A user sent twice in one batch: the later entry wins, as it would in two calls.
      updates = [...new Map(updates.map((u) => [u.userId, u])).values()];
      if (updates.length === 0) return 0;
      await users.assertExist(
        em,
        updates.map((u) => u.userId),
      );
      return repo.putKyc(em, updates, clock.now());
    },
  };
}
