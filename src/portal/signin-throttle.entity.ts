import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * Failed sign-ins per account, keyed by the SHA-256 of the normalised email whether or not it is a member's,
 * so the lock-out itself tells nobody which emails exist. Shared by every instance.
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
