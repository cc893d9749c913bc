import type { ServiceImpl } from "@connectrpc/connect";
import type { PortalAdminService } from "../../gen/internal/v1/portal_admin_pb.ts";
import type { PartnerService } from "../partners/partner.service.ts";
import { emOf } from "../platform/rpc/context.ts";
import { type AuditService, operatorActor } from "./audit.service.ts";
import type { PeopleService } from "./people.service.ts";
import { toAuditEvent, toInvite, toMember } from "./team.handlers.ts";

/** `internal.v1.PortalAdminService`: the operators' side of the portal. */
export function createPortalAdminHandlers(
  people: PeopleService,
  audit: AuditService,
  partners: PartnerService,
): ServiceImpl<typeof PortalAdminService> {
  return {
    async inviteMember(req, ctx) {
      const { invite, url } = await people.invite(
        emOf(ctx.values),
        operatorActor,
        req.partnerId,
        req.email,
        req.role,
      );
      return { invite: toInvite(invite), inviteUrl: url };
    },
    async listMembers(req, ctx) {
      const em = emOf(ctx.values);
      await partners.get(em, req.partnerId);
      return { members: (await people.list(em, req.partnerId)).map(toMember) };
    },
    async listAuditEvents(req, ctx) {
      const em = emOf(ctx.values);
      await partners.get(em, req.partnerId);
      const page = await audit.list(em, req.partnerId, req.limit, req.startingAfter);
      return { events: page.events.map(toAuditEvent), hasMore: page.hasMore };
    },
  };
}
