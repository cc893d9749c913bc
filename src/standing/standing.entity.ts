import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/** Standing signals as stored (integers only, so the signed document holds no fractions; null where unknown). */
export interface StandingSignals {
  tenureDays: number | null;
  monthsInTier: number | null;
  scoreChange90d: number | null;
  disputesLast90d: number | null;
}

/** Work signals as stored (null where unknown). */
export interface WorkSignals {
  monthsActive: number | null;
  activeDaysLast30d: number | null;
  incomeRegularityBps: number | null;
  employmentVerified: boolean | null;
}

/** A user's standing as the platform last scored it: tier, score and the signals behind them. */
export const StandingEntity = defineEntity({
  name: "Standing",
  tableName: "standings",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("standings_user_id_fkey")
        // Without these, MikroORM would cascade a primary-key relation; the table does not.
        .deleteRule("no action")
        .updateRule("no action"),
    tier: p.enum(["Unrated", "Emerging", "Established", "Trusted"] as const),
    /** 0 to 1000. */
    score: p.integer(),
    /** The version of the scoring model that produced the score. */
    scoreVersion: p.text(),
    standingSignals: p.json<StandingSignals>(),
    workSignals: p.json<WorkSignals>(),
    /** When the platform computed it. */
    asOf: p.datetime(),
    updatedAt: p.datetime(),
  },
  checks: [{ name: "standings_score_check", expression: "score >= 0 and score <= 1000" }],
});

/** A standing row. */
export type Standing = InferEntity<typeof StandingEntity>;
