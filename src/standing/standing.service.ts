import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { validationFailed } from "../platform/errors.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { Outbox } from "../webhooks/outbox.ts";

/** Tiers, lowest first (CONTRACT.md §3); the index is `tierRank`. */
export const tiers = ["Unrated", "Emerging", "Established", "Trusted"] as const;
/** A standing tier. */
export type Tier = (typeof tiers)[number];

/** Standing signals as stored (integers only, so the signed document holds no fractions). */
export interface StandingSignalsData {
  tenureDays: number | null;
  monthsInTier: number | null;
  scoreChange90d: number | null;
  disputesLast90d: number | null;
}

/** Work signals as stored. */
export interface WorkSignalsData {
  monthsActive: number | null;
  activeDaysLast30d: number | null;
  incomeRegularityBps: number | null;
  employmentVerified: boolean | null;
}

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
export function createStandingService({ clock, outbox }: { clock: Clock; outbox: Outbox }) {
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
        const users = await sql<{ id: string; environment: Environment }>(
          tx,
          "select id, environment from users where id = any($1::text[])",
          [ids],
        );
        if (users.length !== new Set(ids).size)
          throw validationFailed({ userId: "every user must exist (UpsertUser first)" });
        const before = new Map(
          (
            await sql<{ user_id: string; tier: Tier; as_of: Date }>(
              tx,
              "select user_id, tier, as_of from standings where user_id = any($1::text[]) for update",
              [ids],
            )
          ).map((r) => [r.user_id, r]),
        );
        let updated = 0;
        const changes: { input: StandingInput; previous: Tier }[] = [];
        for (const u of updates) {
          const prior = before.get(u.userId);
          // An update older than what is stored (a retry arriving late) changes nothing.
          if (prior && new Date(prior.as_of) > u.asOf) continue;
          await sql(
            tx,
            `insert into standings (user_id, tier, score, score_version, standing_signals, work_signals, as_of, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8)
             on conflict (user_id) do update set tier = excluded.tier, score = excluded.score, score_version = excluded.score_version,
               standing_signals = excluded.standing_signals, work_signals = excluded.work_signals, as_of = excluded.as_of,
               updated_at = excluded.updated_at`,
            [
              u.userId,
              u.tier,
              u.score,
              u.scoreVersion,
              JSON.stringify(u.standingSignals),
              JSON.stringify(u.workSignals),
              u.asOf,
              now,
            ],
          );
          updated++;
          if (prior && prior.tier !== u.tier) changes.push({ input: u, previous: prior.tier });
          before.set(u.userId, { user_id: u.userId, tier: u.tier as Tier, as_of: u.asOf });
        }
        // CONTRACT.md §5: each partner holding an ACTIVE consent with scope `standing` hears of the change.
        for (const { input, previous } of changes) {
          const holders = await sql<{ partner_id: string; environment: Environment }>(
            tx,
            `select distinct partner_id, environment from consents
              where user_id = $1 and status = 'ACTIVE' and expires_at > $2 and 'standing' = any(scopes)`,
            [input.userId, now],
          );
          const direction = tiers.indexOf(input.tier as Tier) > tiers.indexOf(previous) ? "UP" : "DOWN";
          for (const h of holders) {
            await outbox.raise(tx, {
              partnerId: h.partner_id,
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

    async upsertKyc(em: Em, updates: KycInput[]): Promise<number> {
      if (updates.length > MAX_BATCH) throw validationFailed({ updates: `at most ${MAX_BATCH} per call` });
      updates.forEach((u, i) => {
        if (!["NONE", "BASIC", "FULL"].includes(u.level))
          throw validationFailed({ [`updates[${i}].level`]: "must be NONE, BASIC or FULL" });
      });
      // A user sent twice in one batch: the later entry wins, as it would in two calls.
      updates = [...new Map(updates.map((u) => [u.userId, u])).values()];
      if (updates.length === 0) return 0;
      const ids = updates.map((u) => u.userId);
      const users = await sql(em, "select id from users where id = any($1::text[])", [ids]);
      if (users.length !== new Set(ids).size)
        throw validationFailed({ userId: "every user must exist (UpsertUser first)" });
      const rows = await sql(
        em,
        `insert into kyc (user_id, level, bvn_verified, nin_verified, phone_verified, address_verified, liveness_checked, verified_at, updated_at)
         select * from unnest($1::text[], $2::text[], $3::bool[], $4::bool[], $5::bool[], $6::bool[], $7::bool[], $8::timestamptz[], $9::timestamptz[])
         on conflict (user_id) do update set level = excluded.level, bvn_verified = excluded.bvn_verified,
           nin_verified = excluded.nin_verified, phone_verified = excluded.phone_verified,
           address_verified = excluded.address_verified, liveness_checked = excluded.liveness_checked,
           verified_at = excluded.verified_at, updated_at = excluded.updated_at
         returning user_id`,
        [
          ids,
          updates.map((u) => u.level),
          updates.map((u) => u.bvnVerified),
          updates.map((u) => u.ninVerified),
          updates.map((u) => u.phoneVerified),
          updates.map((u) => u.addressVerified),
          updates.map((u) => u.livenessChecked),
          updates.map((u) => u.verifiedAt),
          updates.map(() => clock.now()),
        ],
      );
      return rows.length;
    },
  };
}
