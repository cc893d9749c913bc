import { LockMode } from "@mikro-orm/core";
import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import type { Actor, AuditService } from "./audit.service.ts";
import { acceptInvite, confirmEnrolment, inviteMember, lookupInvite } from "./enrolment.ts";
import { PortalMemberEntity, type PortalMemberRow } from "./member.entity.ts";
import { isRole } from "./roles.ts";
import type { SessionService } from "./session.service.ts";

/** Bind the sealed TOTP secrets of invites and members to their rows (the master key's rotation reads them). */
export { inviteAad, memberTotpAad } from "./enrolment.ts";

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

/**
 * A partner's people: invites and enrolment (enrolment.ts), roles and removal (the rules; handlers map the
 * protos).
 */
export function createPeopleService(o: PeopleServiceOptions) {
  const { clock, audit } = o;

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
    invite: (em: Em, actor: Actor, partnerId: string, email: string, role: string) =>
      inviteMember(o, em, actor, partnerId, email, role),
    /** The invite a token names, with its partner's name. */
    lookup: (em: Em, token: string) => lookupInvite(o, em, token),
    /** Sets the invitee's password and a fresh TOTP secret to enrol; nobody is a member yet. */
    accept: (em: Em, token: string, password: string) => acceptInvite(o, em, token, password),
    /** Confirms enrolment with a current code: the member, its recovery codes (shown once) and a session. */
    confirm: (em: Em, actor: Actor, token: string, code: string) =>
      confirmEnrolment(o, em, actor, token, code),

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
