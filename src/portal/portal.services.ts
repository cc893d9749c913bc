import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import type { ServiceBinding } from "../platform/http/transcoder.ts";
import { createPortalAuthHandlers } from "./portal.handlers.ts";
import type { Portal } from "./portal.ts";
import { createTeamHandlers } from "./team.handlers.ts";

/** Every portal procedure's path starts so (`/portal.v1.TeamService/ListMembers`). */
export const PORTAL_PROCEDURES = "/portal.v1.";

/** The portal's own Connect services, served on the partner listener behind the portal edge. */
export function portalConnectServices(portal: Portal): ServiceBinding[] {
  return [
    { service: PortalAuthService, impl: createPortalAuthHandlers(portal) as never },
    { service: TeamService, impl: createTeamHandlers(portal.people, portal.audit) as never },
  ];
}
