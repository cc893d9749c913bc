import { type ContextValues, createContextKey } from "@connectrpc/connect";
import type { Environment } from "../platform/tenancy.ts";
import type { Actor } from "./audit.service.ts";
import type { Role } from "./roles.ts";
import type { LiveSession } from "./session.service.ts";

/** Where the audit log and the throttles read the client's address (set on every face, REST included). */
export { kClientAddress } from "../platform/rpc/context.ts";

/** A call made from the portal: who, from where, and the session when there is one. */
export interface PortalCall {
  actor: Actor;
  session?: LiveSession;
  /** The environment selected with `x-portal-environment` (partner API calls only). */
  environment?: Environment;
  /** The device cookie the browser sent (sign-in only: the cookie's path keeps it from every other call). */
  device?: string;
  /** Set once the call's audit wrapper has been entered (the edge enters it once). */
  audited?: boolean;
}

/** Set by the edge on every portal call, and on partner API calls made with a portal session. */
export const kPortal = createContextKey<PortalCall | undefined>(undefined, { description: "portal call" });

/** The person behind a partner API call made with a portal session. */
export interface PortalMember {
  /** `mbr_` id. */
  id: string;
  role: Role;
}

/**
 * The portal member who made a partner API call, or undefined when an API key made it: for the methods only
 * people may call (managing API keys), whatever face the call came in on.
 */
export function portalMemberOf(values: ContextValues): PortalMember | undefined {
  const session = values.get(kPortal)?.session;
  return session && { id: session.memberId, role: session.role };
}
