import { LockMode } from "@mikro-orm/core";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { type AddressGuard, createAddressGuard } from "../ratelimit/address-guard.ts";
import type { Actor, AuditService } from "./audit.service.ts";
import { PortalMemberEntity, type PortalMemberRow } from "./member.entity.ts";
import { verifyDummy, verifyPassword } from "./password.ts";
import { memberTotpAad } from "./people.service.ts";
import type { SessionService } from "./session.service.ts";
import { signinThrottleRepository } from "./signin-throttle.repository.ts";
import { isRecoveryCode, totpStep, useRecoveryCode } from "./totp.ts";

/** Failures an account may have before it locks: then 30 s, doubling with each failure, at most an hour. */
const FREE_FAILURES = 5;
const FIRST_LOCK_MS = 30 * ms.second;
const MAX_LOCK_MS = ms.hour;
/** Per client address: 20 failed sign-ins, then one every 10 seconds (in this instance's memory). */
export const SIGNIN_ADDRESS_LIMITS = { capacity: 20, refillPerSecond: 0.1 };
const FAILED = "The email, password or code is not right.";

/** Options for {@link createSigninService}. */
export interface SigninServiceOptions {
  clock: Clock;
  box: SecretBox;
  audit: AuditService;
  sessions: SessionService;
  /** Failed sign-ins per client address (tests pass their own). */
  addresses?: AddressGuard;
}

/** What {@link createSigninService} returns. */
export type SigninService = ReturnType<typeof createSigninService>;

/**
 * Sign-in: email, password and a TOTP code (or a recovery code, used up). Every failure is the same 401,
 * after the same work (an unknown email still costs a password hash), and the per-account lock-out is kept
 * per email whether or not it is a member's, so nothing tells which emails exist.
 */
export function createSigninService(o: SigninServiceOptions) {
  const { clock, box, audit, sessions } = o;
  const addresses =
    o.addresses ?? createAddressGuard({ failures: SIGNIN_ADDRESS_LIMITS, pages: SIGNIN_ADDRESS_LIMITS });

  // Accounts (email digests) with a sign-in under way on this instance: one at a time per account, so a burst
  // of guesses cannot all pass the lock-out check before any of them is charged (the check is read before the
  // password hash, the failure written after it). Holds only what is in flight.
  const inFlight = new Set<string>();

  const throttled = (seconds: number) =>
    new ApiError("rate_limited", "Too many failed sign-ins; try again later.", {
      retryAfterSeconds: Math.max(1, Math.ceil(seconds)),
    });

  /** Charges a failure to the account (and locks it past the free failures). */
  const fail = async (em: Em, emailHash: Buffer) => {
    const now = clock.now();
    const failures = await signinThrottleRepository.fail(em, emailHash, now);
    if (failures >= FREE_FAILURES) {
      const lock = Math.min(MAX_LOCK_MS, FIRST_LOCK_MS * 2 ** (failures - FREE_FAILURES));
      await signinThrottleRepository.lock(em, emailHash, new Date(now.getTime() + lock));
    }
  };

  /** The second factor: a TOTP code not used before, or a recovery code (then used up). */
  const secondFactor = (member: PortalMemberRow, code: string) => {
    if (isRecoveryCode(code)) {
      const rest = useRecoveryCode(member.recoveryHashes, code);
      if (!rest) return undefined;
      member.recoveryHashes = rest;
      return "recovery" as const;
    }
    const secret = box.open(member.totpEnc, memberTotpAad(member.id)).toString();
    const step = totpStep(secret, code.trim(), clock.now().getTime());
    // A code already accepted (or an older one) is refused: a code seen over a shoulder is spent.
    if (step === undefined || step <= member.totpLastStep) return undefined;
    member.totpLastStep = step;
    return "totp" as const;
  };

  return {
    /** Signs in; the session's token is returned here only. */
    async signIn(em: Em, actor: Actor, email: string, password: string, code: string) {
      // Charged before the password hash, not after it: a burst from one address is refused here at once
      // rather than queueing for the hashing slots (and cannot overdraw the bucket by arriving together).
      const byAddress = addresses.reserveFailure(actor.address);
      if (!byAddress.allowed) throw throttled(byAddress.retryAfterSeconds);
      const normal = email.trim().toLowerCase().slice(0, 320);
      const emailHash = sha256(`portal-signin:${normal}`);
      const account = emailHash.toString("hex");
      // The same answer for any email, a member's or not: nothing here tells which emails exist.
      if (inFlight.has(account)) throw throttled(1);
      inFlight.add(account);
      try {
        return await attempt(em, actor, normal, emailHash, password, code);
      } finally {
        inFlight.delete(account);
      }
    },
  };

  async function attempt(
    em: Em,
    actor: Actor,
    normal: string,
    emailHash: Buffer,
    password: string,
    code: string,
  ) {
    const lockedUntil = await signinThrottleRepository.lockedUntil(em, emailHash);
    const now = clock.now().getTime();
    if (lockedUntil && lockedUntil.getTime() > now) throw throttled((lockedUntil.getTime() - now) / 1000);

    const found = normal ? await em.findOne(PortalMemberEntity, { email: normal, removedAt: null }) : null;
    // The same work whether or not the email is a member's.
    const passwordOk = found
      ? await verifyPassword(password.slice(0, 1024), found.passwordHash)
      : await verifyDummy(password.slice(0, 1024));
    const outcome =
      found && passwordOk
        ? await em.transactional(async (tx) => {
            const member = await tx.findOne(
              PortalMemberEntity,
              { id: found.id, removedAt: null },
              { lockMode: LockMode.PESSIMISTIC_WRITE },
            );
            const how = member ? secondFactor(member, code) : undefined;
            if (!member || !how) return undefined;
            await tx.flush();
            await signinThrottleRepository.clear(tx, emailHash);
            const who = { ...actor, id: member.id, email: member.email };
            if (how === "recovery")
              await audit.record(tx, who, { partnerId: member.partnerId, action: "recovery_code_used" });
            await audit.record(tx, who, { partnerId: member.partnerId, action: "sign_in" });
            return { member, session: await sessions.start(tx, member) };
          })
        : undefined;
    if (outcome) {
      addresses.refund(actor.address);
      return outcome;
    }
    await fail(em, emailHash);
    // Recorded in the member's partner's log; a failure for an email nobody has is in no partner's log.
    if (found)
      await audit.record(
        em,
        { ...actor, id: "", email: found.email },
        {
          partnerId: found.partnerId,
          action: "sign_in_failed",
          outcome: "unauthenticated",
        },
      );
    throw new ApiError("unauthenticated", FAILED);
  }
}
