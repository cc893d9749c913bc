import type { BucketSpec } from "../ratelimit/limiters.service.ts";
import { bool, bucket, type Env } from "./env.ts";

/** The partner portal's protection against guessed passwords. */
export interface PortalSettings {
  /**
   * Failed portal sign-ins (docs/portal.md "Signing in"), each a token bucket shared by every instance:
   * PORTAL_SIGNIN_ADDRESS_LIMIT per client address (an IPv6 /64 counts as one), PORTAL_SIGNIN_ACCOUNT_LIMIT per
   * account from browsers that have not signed in to it before, PORTAL_SIGNIN_DEVICE_LIMIT per browser that has.
   */
  portalSignin: { address: BucketSpec; account: BucketSpec; device: BucketSpec };
  /**
   * REQUEST_LOG (on unless `false`): the calls made with partners' keys are logged for the portal's request log
   * (proto/partner/v1/requests.proto). Off, nothing is written and the log shows nothing new.
   */
  requestLog: boolean;
}

/**
 * Failed portal sign-ins: 20 per client address, then one every 10 seconds (a proxy shares one address among
 * many people, and a member on a browser they have signed in on is never counted here); 5 per account from
 * browsers it has not signed in on, then one every 5 minutes; 10 per browser that has, then one every 5
 * minutes. None of them ever holds back a member on their own browser because of someone else's guesses.
 */
export const defaultPortalSigninLimits = {
  address: { capacity: 20, refillPerSecond: 0.1 },
  account: { capacity: 5, refillPerSecond: 1 / 300 },
  device: { capacity: 10, refillPerSecond: 1 / 300 },
} as const satisfies PortalSettings["portalSignin"];

/** Reads PORTAL_SIGNIN_ADDRESS_LIMIT, PORTAL_SIGNIN_ACCOUNT_LIMIT and PORTAL_SIGNIN_DEVICE_LIMIT. */
export function readPortalSettings(env: Env): PortalSettings {
  return {
    requestLog: bool(env, "REQUEST_LOG", true),
    portalSignin: {
      address: bucket(env, "PORTAL_SIGNIN_ADDRESS_LIMIT", defaultPortalSigninLimits.address),
      account: bucket(env, "PORTAL_SIGNIN_ACCOUNT_LIMIT", defaultPortalSigninLimits.account),
      device: bucket(env, "PORTAL_SIGNIN_DEVICE_LIMIT", defaultPortalSigninLimits.device),
    },
  };
}
