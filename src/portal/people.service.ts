import { LockMode, UniqueConstraintViolationException } from "@mikro-orm/core";
import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Actor, AuditService } from "./audit.service.ts";
import { MAX_WRONG_CODES, PortalInviteEntity, type PortalInviteRow } from "./invite.entity.ts";
import { PortalMemberEntity, type PortalMemberRow } from "./member.entity.ts";
import { checkPassword, hashPassword } from "./password.ts";
import { isRole, type Role } from "./roles.ts";
import type { SessionService } from "./session.service.ts";
import { enrolment, newRecoveryCodes, newTotpSecret, totpStep } from "./totp.ts";

/** An invite is good for 72 hours (docs/portal.md). */
const INVITE_MS = 72 * ms.hour;
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]{2,}$/;
/** Binds an invite's sealed TOTP secret (chosen at acceptance, before confirmation) to the invite. */
export const inviteAad = (id: string) => `portal-invite-totp:${id}`;
/** Binds a member's sealed TOTP secret to the member. */
export const memberTotpAad = (id: string) => `portal-member-totp:${id}`;

/** Options for {@link createPeopleService}. */
export interface PeopleServiceOptions {
  clock: Clock;
  box: SecretBox;
  partners: PartnerService;
  audit: AuditService;
  sessions: SessionService;
  /** Base URL of invite links: PUBLIC_URL, or the partner listener once bound. */
  publicUrl: () => string;
}

/** What {@link createPeopleService} returns. */
export type PeopleService = ReturnType<typeof createPeopleService>;

/** A partner's people: invites, enrolment, roles and removal (the rules; handlers map the protos). */
export function createPeopleService(o: PeopleServiceOptions) {
  const { clock, box, audit } = o;

  /** The invite a token names, if it is still usable (unused, within its 72 hours), locked when asked. */
  const openInvite = async (em: Em, token: string, lock = false): Promise<PortalInviteRow> => {
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
  };

  const activeMember = (em: Em, partnerId: string, memberId: string, lock = false) =>
    isId("mbr", memberId)
      ? em.findOne(
          PortalMemberEntity,
          { id: memberId, partnerId, removedAt: null },
          lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
        )
      : Promise.resolve(null);

  /** Refuses to leave a partner without an admin; runs under a lock on the partner's admins. */
  const keepAnAdmin = async (em: Em, partnerId: string, leaving: PortalMemberRow) => {
    if (leaving.role !== "admin") return;
    const admins = await em.find(
      PortalMemberEntity,
      { partnerId, role: "admin", removedAt: null },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (admins.filter((a) => a.id !== leaving.id).length === 0)
      throw new ApiError("conflict", "This is the partner's last admin: make another admin first.");
  };

  return {
    /** Invites `email` to `partnerId`'s team; the URL (with its token after `#`) is returned here only. */
    async invite(em: Em, actor: Actor, partnerId: string, email: string, role: string) {
      const normal = email.trim().toLowerCase();
      const fields: Record<string, string> = {};
      if (!EMAIL.test(normal) || normal.length > 254) fields.email = "must be an email address";
      if (!isRole(role)) fields.role = 'must be "admin", "developer" or "viewer"';
      if (Object.keys(fields).length) throw validationFailed(fields);
      await o.partners.get(em, partnerId);
      const token = randomBase62(32);
      const now = clock.now();
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
          throw new ApiError("conflict", "This email is already a member of a partner's team.");
        tx.persist(tx.create(PortalInviteEntity, row));
        await tx.flush();
        await audit.record(tx, actor, { partnerId, action: "member_invited", target: row.id, detail: role });
      });
      // The token rides in the fragment: browsers never send it, so no log on the way can keep it.
      return { invite: row, url: `${o.publicUrl()}/portal/invite#${token}` };
    },

    /** The invite a token names, with its partner's name. */
    async lookup(em: Em, token: string) {
      const invite = await openInvite(em, token);
      const partner = await o.partners.get(em, invite.partnerId);
      return { invite, partnerName: partner.name };
    },

    /** Sets the invitee's password and a fresh TOTP secret to enrol; nobody is a member yet. */
    async accept(em: Em, token: string, password: string) {
      checkPassword(password);
      // The token first (one indexed read): an unknown, used or expired one never costs a password hash, so
      // guessed tokens cannot keep the hashing busy for people signing in.
      await openInvite(em, token);
      // The holder of a live invitation is no stranger: joining does not wait behind guesses at sign-in.
      const hash = await hashPassword(password, "first");
      const secret = newTotpSecret();
      // The slow hash runs before the transaction: no connection is held while it works.
      const invite = await em.transactional(async (tx) => {
        const found = await openInvite(tx, token, true);
        found.passwordHash = hash;
        found.totpEnc = box.seal(Buffer.from(secret), inviteAad(found.id));
        await tx.flush();
        return found;
      });
      return enrolment(secret, invite.email);
    },

    /** Confirms enrolment with a current code: the member, its recovery codes (shown once) and a session. */
    async confirm(em: Em, actor: Actor, token: string, code: string) {
      const codes = newRecoveryCodes();
      const result = await em.transactional(async (tx) => {
        const invite = await openInvite(tx, token, true);
        if (!invite.passwordHash || !invite.totpEnc)
          throw new ApiError("conflict", "Set a password first (AcceptInvite).");
        const secret = box.open(invite.totpEnc, inviteAad(invite.id)).toString();
        const step = totpStep(secret, code.trim(), clock.now().getTime());
        if (step === undefined) {
          // Counted and kept (the refusal is returned, not thrown, so the count commits): ten wrong codes
          // spend the invite, so holding its URL is not a licence to try every code.
          invite.wrongCodes += 1;
          if (invite.wrongCodes >= MAX_WRONG_CODES) {
            invite.usedAt = clock.now();
            invite.passwordHash = null;
            invite.totpEnc = null;
          }
          await tx.flush();
          return { wrong: invite.wrongCodes >= MAX_WRONG_CODES ? ("spent" as const) : ("wrong" as const) };
        }
        const id = newId("mbr");
        const member: PortalMemberRow = {
          id,
          partnerId: invite.partnerId,
          email: invite.email,
          role: invite.role,
          passwordHash: invite.passwordHash,
          totpEnc: box.seal(Buffer.from(secret), memberTotpAad(id)),
          totpLastStep: step,
          recoveryHashes: codes.hashes,
          createdAt: clock.now(),
          removedAt: null,
        };
        invite.usedAt = clock.now();
        invite.passwordHash = null;
        invite.totpEnc = null;
        tx.persist(tx.create(PortalMemberEntity, member));
        try {
          await tx.flush();
        } catch (err) {
          if (err instanceof UniqueConstraintViolationException)
            throw new ApiError("conflict", "This email is already a member of a partner's team.");
          throw err;
        }
        const who = { ...actor, id, email: member.email };
        await audit.record(tx, who, { partnerId: member.partnerId, action: "enrolled", target: invite.id });
        const session = await o.sessions.start(tx, member);
        return { member, session };
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
    },

    /** A partner's active members, oldest first. */
    list(em: Em, partnerId: string): Promise<PortalMemberRow[]> {
      return em.find(
        PortalMemberEntity,
        { partnerId, removedAt: null },
        { orderBy: { createdAt: "asc", id: "asc" } },
      );
    },

    /** Changes a member's role; never demotes the last admin. */
    async changeRole(em: Em, actor: Actor, partnerId: string, memberId: string, role: string) {
      if (!isRole(role)) throw validationFailed({ role: 'must be "admin", "developer" or "viewer"' });
      return em.transactional(async (tx) => {
        const member = await activeMember(tx, partnerId, memberId, true);
        if (!member) throw new ApiError("not_found", `No member ${memberId}.`);
        if (role !== "admin") await keepAnAdmin(tx, partnerId, member);
        member.role = role;
        await tx.flush();
        await audit.record(tx, actor, { partnerId, action: "role_changed", target: member.id, detail: role });
        return member;
      });
    },

    /** Removes a member and ends its sessions at once; never the last admin. */
    async remove(em: Em, actor: Actor, partnerId: string, memberId: string): Promise<void> {
      await em.transactional(async (tx) => {
        const member = await activeMember(tx, partnerId, memberId, true);
        if (!member) throw new ApiError("not_found", `No member ${memberId}.`);
        await keepAnAdmin(tx, partnerId, member);
        member.removedAt = clock.now();
        await tx.flush();
        await o.sessions.endAll(tx, member.id);
        await audit.record(tx, actor, { partnerId, action: "member_removed", target: member.id });
      });
    },
  };
}
