import { LockMode } from "@mikro-orm/core";
import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { sha256Hex } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { addressKey } from "../platform/ip.ts";
import type { Actor, AuditService } from "./audit.service.ts";
import type { DeviceCookies } from "./device-cookie.ts";
import { memberTotpAad } from "./enrolment.ts";
import { PortalMemberEntity, type PortalMemberRow } from "./member.entity.ts";
import { verifyDummy, verifyPassword } from "./password.ts";
import type { SessionService } from "./session.service.ts";
import { createSigninLimits, type SigninCharge, type SigninLimitsSpec } from "./signin-limits.ts";
import { isRecoveryCode, totpStep, useRecoveryCode } from "./totp.ts";

const FAILED = "The email, password or code is not right.";

/** The account an email signs in to, a member's or not: its digest, under which its failures are counted. */
const accountOf = (email: string) => sha256Hex(`portal-signin:${email.trim().toLowerCase().slice(0, 320)}`);

/** Options for {@link createSigninService}. */
export interface SigninServiceOptions {
  clock: Clock;
  box: SecretBox;
  audit: AuditService;
  sessions: SessionService;
  /** The buckets of failed sign-ins (`Config.portalSignin`). */
  limits: SigninLimitsSpec;
  devices: DeviceCookies;
}

/** What {@link createSigninService} returns. */
export type SigninService = ReturnType<typeof createSigninService>;

/**
 * The second factor: a TOTP code not used before, or a recovery code (then used up). Either is recorded on
 * `member`, to be flushed in the sign-in's transaction.
 */
function secondFactor(
  { box, clock }: Pick<SigninServiceOptions, "box" | "clock">,
  member: PortalMemberRow,
  code: string,
): "recovery" | "totp" | undefined {
  if (isRecoveryCode(code)) {
    const rest = useRecoveryCode(member.recoveryHashes, code);
    if (!rest) return undefined;
    member.recoveryHashes = rest;
    return "recovery";
  }
  const secret = box.open(member.totpEnc, memberTotpAad(member.id)).toString();
  const step = totpStep(secret, code.trim(), clock.now().getTime());
  // A code already accepted (or an older one) is refused: a code seen over a shoulder is spent.
  if (step === undefined || step <= member.totpLastStep) return undefined;
  member.totpLastStep = step;
  return "totp";
}

/**
 * Sign-in: email, password and a TOTP code (or a recovery code, used up). Every failure is the same 401,
 * after the same work (an unknown email still costs a password hash), and the limits on failures are kept per
 * email whether or not it is a member's, so nothing tells which emails exist. A browser that has signed in as
 * the member before (its device cookie) is held only to its own bucket: the second factor is asked of it all
 * the same.
 */
export function createSigninService(o: SigninServiceOptions) {
  const { audit, sessions, devices } = o;
  const limits = createSigninLimits(o.limits);

  return {
    /** The bucket families of failed sign-ins, for the retention purge. */
    buckets: limits.families,

    /** A device cookie for the browser a member has just joined from (enrolment is a sign-in too). */
    deviceCookie: (member: Pick<PortalMemberRow, "id" | "email">) =>
      devices.issue(accountOf(member.email), member.id),

    /**
     * Signs in; the session's token, and the device cookie's new value for this browser, are returned here
     * only. `device` is the device cookie the browser sent, if any.
     */
    async signIn(
      em: Em,
      actor: Actor,
      email: string,
      password: string,
      code: string,
      device: string | undefined,
    ) {
      const normal = email.trim().toLowerCase().slice(0, 320);
      const account = accountOf(normal);
      const address = addressKey(actor.address);
      // Opened before any query: the email is the value's associated data.
      const claim = devices.open(device, account);
      if (!claim) limits.screen(address);
      const found = normal ? await em.findOne(PortalMemberEntity, { email: normal, removedAt: null }) : null;
      // A device cookie counts only for the member it was issued to, and only while the email is theirs.
      const known = claim && found && claim.memberId === found.id ? claim.id : undefined;
      if (claim && !known) limits.screen(address);
      const charge: SigninCharge = known ? { device: known } : { address, account };
      // Charged before the password hash, not after it: attempts arriving together cannot overdraw a bucket,
      // and a refused one never waits for the hashing slots.
      await limits.charge(em, charge);

      // The same work whether or not the email is a member's.
      const passwordOk = found
        ? await verifyPassword(password.slice(0, 1024), found.passwordHash, known ? "first" : "others")
        : await verifyDummy(password.slice(0, 1024));
      const outcome =
        found && passwordOk
          ? await em.transactional(async (tx) => {
              const member = await tx.findOne(
                PortalMemberEntity,
                { id: found.id, removedAt: null },
                { lockMode: LockMode.PESSIMISTIC_WRITE },
              );
              // The second factor is asked of every browser, known to the member or not.
              const how = member ? secondFactor(o, member, code) : undefined;
              if (!member || !how) return undefined;
              await tx.flush();
              await limits.succeeded(tx, charge);
              const who = { ...actor, id: member.id, email: member.email };
              if (how === "recovery")
                await audit.record(tx, who, { partnerId: member.partnerId, action: "recovery_code_used" });
              await audit.record(tx, who, { partnerId: member.partnerId, action: "sign_in" });
              const session = await sessions.start(tx, member);
              return { member, session, device: devices.issue(account, member.id, known) };
            })
          : undefined;
      if (outcome) return outcome;
      // A failure keeps its charge. It is recorded in the member's partner's log; a failure for an email
      // nobody has is in no partner's log.
      if (found)
        await audit.record(
          em,
          { ...actor, id: "", email: found.email },
          { partnerId: found.partnerId, action: "sign_in_failed", outcome: "unauthenticated" },
        );
      throw new ApiError("unauthenticated", FAILED);
    },
  };
}
