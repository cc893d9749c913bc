import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { AuditEventSchema, InviteSchema, MemberSchema } from "../../gen/portal/v1/members_pb.ts";
import type { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { emOf } from "../platform/rpc/context.ts";
import type { AuditService, AuditView } from "./audit.service.ts";
import type { PortalInviteRow } from "./invite.entity.ts";
import type { PortalMemberRow } from "./member.entity.ts";
import type { PeopleService } from "./people.service.ts";
import { kPortal } from "./portal.context.ts";

/** A member as the protos show it: no secrets. */
export function toMember(m: PortalMemberRow): MessageInitShape<typeof MemberSchema> {
  return {
    id: m.id,
    partnerId: m.partnerId,
    email: m.email,
    role: m.role,
    createdAt: timestampFromDate(m.createdAt),
  };
}

/** An invite as the protos show it: no token. */
export function toInvite(i: PortalInviteRow): MessageInitShape<typeof InviteSchema> {
  return {
    id: i.id,
    partnerId: i.partnerId,
    email: i.email,
    role: i.role,
    expiresAt: timestampFromDate(i.expiresAt),
  };
}

/** An audit event as the protos show it. */
export function toAuditEvent(e: AuditView): MessageInitShape<typeof AuditEventSchema> {
  return {
    id: e.id,
    partnerId: e.partnerId,
    actor: e.actor,
    actorEmail: e.actorEmail,
    action: e.action,
    target: e.target,
    outcome: e.outcome,
    environment: e.environment,
    detail: e.detail,
    clientAddress: e.clientAddress,
    userAgent: e.userAgent,
    createdAt: timestampFromDate(e.createdAt),
  };
}

/** The admin's session and actor (the portal edge admits only admins here). */
function adminOf(ctx: HandlerContext) {
  const portal = ctx.values.get(kPortal);
  if (!portal?.session) throw new Error("team handler reached without an admin session");
  return { session: portal.session, actor: portal.actor };
}

/** `portal.v1.TeamService`: an admin's team and audit log, always the admin's own partner's. */
export function createTeamHandlers(
  people: PeopleService,
  audit: AuditService,
): ServiceImpl<typeof TeamService> {
  return {
    async listMembers(_req, ctx) {
      const { session } = adminOf(ctx);
      return { members: (await people.list(emOf(ctx.values), session.partnerId)).map(toMember) };
    },
    async inviteMember(req, ctx) {
      const { session, actor } = adminOf(ctx);
      const { invite, url } = await people.invite(
        emOf(ctx.values),
        actor,
        session.partnerId,
        req.email,
        req.role,
      );
      return { invite: toInvite(invite), inviteUrl: url };
    },
    async changeRole(req, ctx) {
      const { session, actor } = adminOf(ctx);
      const member = await people.changeRole(
        emOf(ctx.values),
        actor,
        session.partnerId,
        req.memberId,
        req.role,
      );
      return { member: toMember(member) };
    },
    async removeMember(req, ctx) {
      const { session, actor } = adminOf(ctx);
      await people.remove(emOf(ctx.values), actor, session.partnerId, req.memberId);
      return {};
    },
    async listAuditEvents(req, ctx) {
      const { session } = adminOf(ctx);
      const page = await audit.list(emOf(ctx.values), session.partnerId, req.limit, req.startingAfter);
      return { events: page.events.map(toAuditEvent), hasMore: page.hasMore };
    },
  };
}
