import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * The per-account lock-out of earlier releases (failed sign-ins per email digest). This release counts
 * failures in shared token buckets instead (signin-limits.ts) and never writes here; the table stays so that
 * instances of the earlier release keep signing people in during a rolling deploy, its rows go with the
 * retention purge a day after their last failure, and a later migration drops it.
 */
export const PortalSigninThrottleEntity = defineEntity({
  name: "PortalSigninThrottle",
  tableName: "portal_signin_throttles",
  properties: {
    emailHash: p.type("bytea").primary(),
    failures: p.integer(),
    lockedUntil: p.datetime().nullable(),
    updatedAt: p.datetime(),
  },
  indexes: [{ name: "portal_signin_throttles_by_age", properties: ["updatedAt"] }],
});

/** A sign-in throttle row. */
export type PortalSigninThrottleRow = InferEntity<typeof PortalSigninThrottleEntity>;
