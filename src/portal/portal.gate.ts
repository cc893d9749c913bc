import type { DescMethod, Message } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { rateClassOf } from "../platform/http/rules.ts";
import type { Logger } from "../platform/logger.ts";
import { emOf, inUnit, kRequestHost } from "../platform/rpc/context.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { AuditService } from "./audit.service.ts";
import { cookieOf, requireSameOrigin, SESSION_COOKIE } from "./cookies.ts";
import { kClientAddress, kPortal } from "./portal.context.ts";
import type { SessionService } from "./session.service.ts";

/** The header a portal session selects its environment with. */
export const ENVIRONMENT_HEADER = "x-portal-environment";

/** What the gate needs of a call (the edge's `EdgeCall`). */
interface GateCall {
  method: DescMethod;
  requestHeader: Headers;
  values: ContextValues;
}

/** Options for {@link createPortalGate}. */
export interface PortalGateOptions {
  sessions: SessionService;
  audit: AuditService;
  publicUrl: () => string;
  /** True when PUBLIC_URL is set: then its origin is the only one a portal call may come from. */
  publicUrlFixed?: boolean;
  logger: Logger;
}

/** What {@link createPortalGate} returns. */
export type PortalGate = ReturnType<typeof createPortalGate>;

const ID = /^[a-z]{3}_[0-9A-Z]{26}$/;

/** The id a call was about: the request's `id` or `…Id` field, else the id of what the answer holds. */
function targetOf(request: Message, response: unknown): string {
  for (const [k, v] of Object.entries(request))
    if ((k === "id" || k.endsWith("Id")) && typeof v === "string" && ID.test(v)) return v;
  for (const v of Object.values((response ?? {}) as Record<string, unknown>)) {
    const id = (v as { id?: unknown } | null)?.id;
    if (typeof id === "string" && ID.test(id)) return id;
  }
  return "";
}

/**
 * The partner edge's other door: a portal session in place of an API key (docs/portal.md). Only a request
 * without an `Authorization` header and with the session cookie comes here; the API key path never does,
 * and costs nothing more than before.
 */
export function createPortalGate(o: PortalGateOptions) {
  return {
    /** The session cookie's token, when this request authenticates with one rather than a bearer key. */
    tokenOf(header: Headers): string | undefined {
      if (header.has("authorization")) return undefined;
      return cookieOf(header, SESSION_COOKIE);
    },

    /**
     * Admits a partner API call made with a portal session: same origin, a live session, the environment
     * the person selected, and the role's gate (a viewer reads only). The caller's `keyId` is the member's id and
     * the environment, so the member has rate-limit buckets of its own in each environment, never shared with
     * the partner's API keys.
     */
    async admit(call: GateCall, em: Em, token: string): Promise<Caller> {
      requireSameOrigin(call.requestHeader, o.publicUrl(), call.values.get(kRequestHost), o.publicUrlFixed);
      const session = await o.sessions.resolve(em, token);
      if (!session) throw new ApiError("unauthenticated", "The portal session has ended; sign in again.");
      const environment = call.requestHeader.get(ENVIRONMENT_HEADER);
      if (environment !== "sandbox" && environment !== "production")
        throw new ApiError("invalid_argument", `Send ${ENVIRONMENT_HEADER}: sandbox or production.`);
      if (session.role === "viewer" && rateClassOf(call.method) === "write")
        throw new ApiError(
          "permission_denied",
          "A viewer may only read; ask an admin for the developer role.",
        );
      call.values.set(kPortal, {
        session,
        environment: environment as Environment,
        actor: {
          id: session.memberId,
          email: session.email,
          address: call.values.get(kClientAddress),
          userAgent: call.requestHeader.get("user-agent") ?? "",
        },
      });
      // One bucket (and one cache entry of limits) per member and environment: a member's sandbox use never
      // draws on, or sizes, its production bucket.
      return { keyId: `${session.memberId}.${environment}`, partnerId: session.partnerId, environment };
    },

    /**
     * True, once per call, when the call is a write made with a portal session: it is then run through
     * {@link audited}, and recorded in the audit log.
     */
    auditsOnce(call: GateCall): boolean {
      const portal = call.values.get(kPortal);
      if (!portal?.session || portal.audited || rateClassOf(call.method) !== "write") return false;
      portal.audited = true;
      return true;
    },

    /**
     * Runs a session's write and records it in the audit log in the same transaction (a failure is recorded
     * on its own once the write has rolled back).
     */
    async audited(call: GateCall, request: Message, run: () => Promise<unknown>): Promise<unknown> {
      const portal = call.values.get(kPortal);
      if (!portal?.session) return run();
      const { session, actor } = portal;
      const entry = {
        partnerId: session.partnerId,
        action: "api_call" as const,
        environment: portal.environment,
        detail: `${call.method.parent.typeName}/${call.method.name}`,
      };
      const em = emOf(call.values);
      try {
        return await em.transactional((tx) =>
          inUnit(call.values, { kind: "audited", em: tx }, async () => {
            const response = await run();
            await o.audit.record(tx, actor, { ...entry, target: targetOf(request, response) });
            return response;
          }),
        );
      } catch (err) {
        const outcome = err instanceof ApiError ? err.code : "internal";
        await o.audit
          .record(em.fork(), actor, { ...entry, target: targetOf(request, undefined), outcome })
          .catch((e: unknown) => o.logger.error("audit event not recorded", { err: e }));
        throw err;
      }
    },
  };
}
