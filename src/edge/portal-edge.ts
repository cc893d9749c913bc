import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import type { Orm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { rateLimitHeaders } from "../platform/http/rate-limit-headers.ts";
import { kRequestHost, kUnit } from "../platform/rpc/context.ts";
import type { Edge, RequestValidator } from "../platform/rpc/pipeline.ts";
import { cookieOf, DEVICE_COOKIE, requireSameOrigin, SESSION_COOKIE } from "../portal/cookies.ts";
import { kClientAddress, kPortal } from "../portal/portal.context.ts";
import type { SessionService } from "../portal/session.service.ts";
import type { RateLimiter } from "../ratelimit/rate-limiter.ts";

/** The portal's methods that only read, for the rate-limit class (the rest write). */
const READS = new Set(["WhoAmI", "ListMembers", "ListAuditEvents"]);

/** The portal methods a person calls before having a session. */
const WITHOUT_SESSION = new Set(["GetInvite", "AcceptInvite", "ConfirmEnrolment", "SignIn"]);

/** Options for {@link createPortalEdge}. */
export interface PortalEdgeOptions {
  orm: Orm;
  sessions: SessionService;
  publicUrl: () => string;
  /** True when PUBLIC_URL is set: then its origin is the only one a portal call may come from. */
  publicUrlFixed?: boolean;
  /** Each member's own buckets for the portal's services (the service's default read and write limits). */
  rateLimiter: RateLimiter;
  buckets: Record<"read" | "write", Parameters<RateLimiter["take"]>[3]>;
  validate: RequestValidator;
}

/**
 * The edge of the portal's own services (`portal.v1`, on the partner listener): never an API key (an API key
 * must never mint people or sessions), always same-origin Connect calls (the CSRF defence, docs/portal.md),
 * a live session for everything but joining and signing in, and the admin role for the team. A signed-in
 * member's calls draw on the member's own read and write buckets (`<member id>.portal`), apart from the
 * partner API's buckets; joining and signing in have their own limits (per invite, per account and address).
 */
export function createPortalEdge({
  orm,
  sessions,
  publicUrl,
  publicUrlFixed,
  rateLimiter,
  buckets,
  validate,
}: PortalEdgeOptions): Edge {
  return {
    async admit(call) {
      if (call.requestHeader.has("authorization"))
        throw new ApiError(
          "permission_denied",
          "The portal's services are for people signed in to the portal, never for API keys.",
        );
      requireSameOrigin(call.requestHeader, publicUrl(), call.values.get(kRequestHost), publicUrlFixed);
      const em = orm.em.fork();
      const cls = READS.has(call.method.name) ? "read" : "write";
      call.values.set(kUnit, { kind: cls, em: () => em });
      const token = cookieOf(call.requestHeader, SESSION_COOKIE);
      const session = token ? await sessions.resolve(em, token) : undefined;
      const actor = {
        id: session?.memberId ?? "",
        email: session?.email ?? "",
        address: call.values.get(kClientAddress),
        userAgent: call.requestHeader.get("user-agent") ?? "",
      };
      call.values.set(kPortal, { actor, session, device: cookieOf(call.requestHeader, DEVICE_COOKIE) });
      if (WITHOUT_SESSION.has(call.method.name)) return;
      if (!session) throw new ApiError("unauthenticated", "Sign in to the portal first.");
      if (call.method.parent.typeName === TeamService.typeName && session.role !== "admin")
        throw new ApiError("permission_denied", "Only the partner's admins manage the team.");
      const decision = await rateLimiter.take(() => em, `${session.memberId}.portal`, cls, buckets[cls]);
      const headers = rateLimitHeaders(cls, decision);
      for (const [k, v] of Object.entries(headers)) call.responseHeader.set(k, v);
      if (!decision.allowed)
        throw new ApiError("rate_limited", undefined, {
          retryAfterSeconds: decision.retryAfterSeconds,
          headers,
        });
    },
    async invoke(call, request, handler) {
      validate(call.method.input, request);
      return handler();
    },
  };
}
