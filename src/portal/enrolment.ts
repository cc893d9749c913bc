import { LockMode, UniqueConstraintViolationException } from "@mikro-orm/core";
import { ms } from "../platform/clock.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Actor } from "./audit.service.ts";
import { MAX_WRONG_CODES, PortalInviteEntity, type PortalInviteRow } from "./invite.entity.ts";
import { PortalMemberEntity, type PortalMemberRow } from "./member.entity.ts";
import { checkPassword, hashPassword } from "./password.ts";
import type { PeopleServiceOptions } from "./people.service.ts";
import { isRole, type Role } from "./roles.ts";
import { enrolment, newRecoveryCodes, newTotpSecret, totpStep } from "./totp.ts";

/*
 * Joining a partner's team: an admin invites an email, the invitee sets a password and a TOTP secret, and
 * becomes a member by confirming a current code. Nobody is a member before that last step.
 */

/** An invite is good for 72 hours (docs/portal.md). */
const INVITE_MS = 72 * ms.hour;
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]{2,}$/;
/** Binds an invite's sealed TOTP secret (chosen at acceptance, before confirmation) to the invite. */
export const inviteAad = (id: string) => `portal-invite-totp:${id}`;
/** Binds a member's sealed TOTP secret to the member. */
export const memberTotpAad = (id: string) => `portal-member-totp:${id}`;

const ALREADY_A_MEMBER = "This email is already a member of a partner's team.";

/** The invite a token names, if it is still usable (unused, within its 72 hours), locked when asked. */
async function openInvite(
  { clock }: PeopleServiceOptions,
  em: Em,
  token: string,
  lock = false,
): Promise<PortalInviteRow> {
  const row =
    token.length === 43 || token.length === 32
      ? await em.findOne(
          PortalInviteEntity,
          { tokenHash: sha256(token) },
          lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
        )
      : null;
  if (!row || row.usedAt || row.expiresAt <= clock.now())
    throw new ApiError("not_found", "This invite is unknown, used or expired: ask for a new one.");
  return row;
}

/** Invites `email` to `partnerId`'s team; the URL (with its token after `#`) is returned here only. */
export async function inviteMember(
  o: PeopleServiceOptions,
  em: Em,
  actor: Actor,
  partnerId: string,
  email: string,
  role: string,
) {
  const normal = email.trim().toLowerCase();
  const fields: Record<string, string> = {};
  if (!EMAIL.test(normal) || normal.length > 254) fields.email = "must be an email address";
  if (!isRole(role)) fields.role = 'must be "admin", "developer" or "viewer"';
  if (Object.keys(fields).length) throw validationFailed(fields);
  await o.partners.get(em, partnerId);
  const token = randomBase62(32);
  const now = o.clock.now();
  const row: PortalInviteRow = {
    id: newId("inv"),
    partnerId,
    email: normal,
    role: role as Role,
    tokenHash: sha256(token),
    invitedBy: actor.id,
    createdAt: now,
    expiresAt: new Date(now.getTime() + INVITE_MS),
    usedAt: null,
    passwordHash: null,
    totpEnc: null,
    wrongCodes: 0,
  };
  await em.transactional(async (tx) => {
    if (await tx.count(PortalMemberEntity, { email: normal, removedAt: null }))
      throw new ApiError("conflict", ALREADY_A_MEMBER);
    tx.persist(tx.create(PortalInviteEntity, row));
    await tx.flush();
    await o.audit.record(tx, actor, { partnerId, action: "member_invited", target: row.id, detail: role });
  });
  // The token rides in the fragment: browsers never send it, so no log on the way can keep it.
  return { invite: row, url: `${o.publicUrl()}/portal/invite#${token}` };
}

/** The invite a token names, with its partner's name. */
export async function lookupInvite(o: PeopleServiceOptions, em: Em, token: string) {
  const invite = await openInvite(o, em, token);
  const partner = await o.partners.get(em, invite.partnerId);
  return { invite, partnerName: partner.name };
}

/** Sets the invitee's password and a fresh TOTP secret to enrol; nobody is a member yet. */
export async function acceptInvite(o: PeopleServiceOptions, em: Em, token: string, password: string) {
  checkPassword(password);
  // The token first (one indexed read): an unknown, used or expired one never costs a password hash, so
  // guessed tokens cannot keep the hashing busy for people signing in.
  await openInvite(o, em, token);
  // The holder of a live invitation is no stranger: joining does not wait behind guesses at sign-in.
  const hash = await hashPassword(password, "first");
  const secret = newTotpSecret();
  // The slow hash runs before the transaction: no connection is held while it works.
  const invite = await em.transactional(async (tx) => {
    const found = await openInvite(o, tx, token, true);
    found.passwordHash = hash;
    found.totpEnc = o.box.seal(Buffer.from(secret), inviteAad(found.id));
    await tx.flush();
    return found;
  });
  return enrolment(secret, invite.email);
}

/** Confirms enrolment with a current code: the member, its recovery codes (shown once) and a session. */
export async function confirmEnrolment(
  o: PeopleServiceOptions,
  em: Em,
  actor: Actor,
  token: string,
  code: string,
) {
  const codes = newRecoveryCodes();
  const result = await em.transactional(async (tx) => {
    const invite = await openInvite(o, tx, token, true);
    if (!invite.passwordHash || !invite.totpEnc)
      throw new ApiError("conflict", "Set a password first (AcceptInvite).");
    const secret = o.box.open(invite.totpEnc, inviteAad(invite.id)).toString();
    const step = totpStep(secret, code.trim(), o.clock.now().getTime());
    if (step === undefined) return { wrong: await countWrongCode(o, tx, invite) };
    const passwordHash = invite.passwordHash;
    return enrol(o, tx, actor, invite, { passwordHash, secret, step, recoveryHashes: codes.hashes });
  });
  if ("wrong" in result) {
    if (result.wrong === "spent")
      throw new ApiError(
        "not_found",
        `Too many wrong codes: this invite is spent. Ask for a new one (${MAX_WRONG_CODES} tries per invite).`,
      );
    throw validationFailed({ code: "is not the current code of the authenticator" });
  }
  return { ...result, recoveryCodes: codes.codes };
}

/**
 * Counts a wrong code against the invite and keeps the count (the caller returns the refusal rather than
 * throwing it, so the count commits): ten wrong codes spend the invite, so holding its URL is not a licence to
 * try every code.
 */
async function countWrongCode({ clock }: PeopleServiceOptions, tx: Em, invite: PortalInviteRow) {
  invite.wrongCodes += 1;
  if (invite.wrongCodes >= MAX_WRONG_CODES) {
    invite.usedAt = clock.now();
    invite.passwordHash = null;
    invite.totpEnc = null;
  }
  await tx.flush();
  return invite.wrongCodes >= MAX_WRONG_CODES ? ("spent" as const) : ("wrong" as const);
}

/** Makes the invitee a member with the credentials it enrolled, its invite used up, and starts its first session. */
async function enrol(
  o: PeopleServiceOptions,
  tx: Em,
  actor: Actor,
  invite: PortalInviteRow,
  credentials: { passwordHash: string; secret: string; step: number; recoveryHashes: Buffer },
) {
  const id = newId("mbr");
  const member: PortalMemberRow = {
    id,
    partnerId: invite.partnerId,
    email: invite.email,
    role: invite.role,
    passwordHash: credentials.passwordHash,
    totpEnc: o.box.seal(Buffer.from(credentials.secret), memberTotpAad(id)),
    totpLastStep: credentials.step,
    recoveryHashes: credentials.recoveryHashes,
    createdAt: o.clock.now(),
    removedAt: null,
  };
  invite.usedAt = o.clock.now();
  invite.passwordHash = null;
  invite.totpEnc = null;
  tx.persist(tx.create(PortalMemberEntity, member));
  try {
    await tx.flush();
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException) throw new ApiError("conflict", ALREADY_A_MEMBER);
    throw err;
  }
  const who = { ...actor, id, email: member.email };
  await o.audit.record(tx, who, { partnerId: member.partnerId, action: "enrolled", target: invite.id });
  const session = await o.sessions.start(tx, member);
  return { member, session };
}
