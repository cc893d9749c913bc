import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { type BucketSpec, createAddressGuard, createKeyedBuckets } from "../ratelimit/limiters.service.ts";

/** The sign-in buckets' limits (`Config.portalSignin`, docs/portal.md "Signing in"). */
export interface SigninLimitsSpec {
  /** Per client address (its `addressKey`: an IPv6 /64 is one address), for browsers not known to the account. */
  address: BucketSpec;
  /** Per account (the email's digest, a member's or not), for browsers not known to it. */
  account: BucketSpec;
  /** Per browser that has signed in as the member (its device cookie). */
  device: BucketSpec;
}

/**
 * Whom an attempt is charged to: the browser, when it carries the member's device cookie; otherwise the
 * client's address and the account, together.
 */
export type SigninCharge = { device: string } | { address: string; account: string };

/** The answer to an attempt a bucket holds back. */
const throttled = (retryAfterSeconds: number) =>
  new ApiError("rate_limited", "Too many failed sign-ins; try again later.", { retryAfterSeconds });

/** What {@link createSigninLimits} returns. */
export type SigninLimits = ReturnType<typeof createSigninLimits>;

/**
 * The limits on failed sign-ins, as OWASP's device cookies have them: guesses from browsers that have never
 * signed in as the member are slowed per account and per client address, and a member on a browser of their
 * own draws only on that browser's bucket, so nobody else's guesses can keep them out. Every bucket is in
 * PostgreSQL, shared by every instance, and charged before the password is hashed (so attempts arriving
 * together are held to what a bucket has); a successful sign-in gives its charge back.
 */
export function createSigninLimits(spec: SigninLimitsSpec) {
  const address = createKeyedBuckets("portal-signin-address", spec.address);
  const account = createKeyedBuckets("portal-signin-account", spec.account);
  const device = createKeyedBuckets("portal-signin-device", spec.device);
  // This instance's own count per address, with the same limits, in front of the shared one, so that a flood
  // from one address is refused without a query: it counts every attempt made here that did not sign in
  // (refused ones too), so it is never behind what this instance charged the shared bucket. The shared
  // bucket is what holds an address to one budget across every instance.
  const screen = createAddressGuard({ failures: spec.address, pages: spec.address });
  return {
    /** The bucket families, for the retention purge (their rows go once full again). */
    families: [address, account, device],

    /**
     * Refuses at once, before any query, an attempt from an address already past its budget on this
     * instance: for browsers not known to the account (a member on their own browser is never counted by
     * address). Whatever it admits must then be charged with {@link charge}.
     */
    screen(key: string): void {
      const d = screen.reserveFailure(key);
      if (!d.allowed) throw throttled(d.retryAfterSeconds);
    },

    /** Charges an attempt before its password is hashed; 429 `rate_limited` with Retry-After when held back. */
    async charge(em: Em, charge: SigninCharge): Promise<void> {
      if ("device" in charge) {
        const d = await device.take(em, charge.device);
        if (!d.allowed) throw throttled(d.retryAfterSeconds);
        return;
      }
      // Both or neither: a refusal thrown here rolls back the other bucket's token with it.
      await em.transactional(async (tx) => {
        const byAddress = await address.take(tx, charge.address);
        if (!byAddress.allowed) throw throttled(byAddress.retryAfterSeconds);
        const byAccount = await account.take(tx, charge.account);
        if (!byAccount.allowed) throw throttled(byAccount.retryAfterSeconds);
      });
    },

    /**
     * Settles a successful sign-in's charge (on `tx`, the sign-in's own transaction): it was no guess, so its
     * tokens go back, and the member's own browser starts again with a full bucket.
     */
    async succeeded(tx: Em, charge: SigninCharge): Promise<void> {
      if ("device" in charge) return device.fill(tx, charge.device);
      screen.refund(charge.address);
      await address.giveBack(tx, charge.address);
      await account.giveBack(tx, charge.account);
    },
  };
}
