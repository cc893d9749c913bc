import { create, type DescMethod, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import type { ApiKeyService } from "../../apikeys/api-key.service.ts";
import type { IdempotencyService } from "../../idempotency/idempotency.service.ts";
import type { PortalGate } from "../../portal/portal.gate.ts";
import type { LimitsService } from "../../ratelimit/limits.service.ts";
import type { RateDecision, RateLimiter } from "../../ratelimit/rate-limiter.ts";
import { constantTimeEqualStrings } from "../crypto/tokens.ts";
import type { Em, Orm } from "../db/orm.ts";
import { ApiError } from "../errors.ts";
import { rateClassOf, restBindings } from "../http/rules.ts";
import type { Metrics } from "../metrics.ts";
import { type Caller, scopeToTenant } from "../tenancy.ts";
import { callerOf, emOf, kCaller, kEm, kLimits, kReplay, lazyEmOf } from "./context.ts";
import { methodKey, type Precheck } from "./prechecks.ts";

/** One call as the edge sees it, whichever face (REST, Connect, gRPC-Web, gRPC) it came in on. */
export interface EdgeCall {
  method: DescMethod;
  requestHeader: Headers;
  values: ContextValues;
  /** Headers to send with the response, success or error. */
  responseHeader: Headers;
}

/**
 * The cross-cutting pipeline around every handler. The Connect interceptor and the REST transcoder both
 * call it, so the faces authenticate, limit, deduplicate and fail identically.
 */
export interface Edge {
  /** Before the request body is read: authentication and the rate limit. */
  admit(call: EdgeCall): Promise<void>;
  /**
   * After the body has arrived, where `admit` ran before it was read (the REST face): the credentials are
   * checked again, so a key revoked or rolled while a body was on its way (it may take the whole request
   * time-out) does not act. A key still cached makes it a lookup in memory.
   */
  confirm?(call: EdgeCall): Promise<void>;
  /** Around the handler, with the decoded request: idempotency for writes. */
  invoke(call: EdgeCall, request: Message, handler: () => Promise<unknown>): Promise<unknown>;
}

/** The bearer token of an `Authorization` header, or undefined. */
export function bearer(header: Headers): string | undefined {
  const value = header.get("authorization");
  if (!value) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1] : "";
}

/** The IETF RateLimit headers (draft-ietf-httpapi-ratelimit-headers) for a decision. */
export function rateLimitHeaders(cls: string, d: RateDecision): Record<string, string> {
  const windowSeconds = Math.max(1, Math.round(d.spec.capacity / d.spec.refillPerSecond));
  return {
    "ratelimit-policy": `"${cls}";q=${d.spec.capacity};w=${windowSeconds}`,
    ratelimit: `"${cls}";r=${d.remaining};t=${d.resetSeconds}`,
  };
}

const postMethods = new WeakMap<DescMethod, boolean>();
const isPost = (method: DescMethod) => {
  let post = postMethods.get(method);
  if (post === undefined) {
    post = restBindings(method)[0]?.verb === "POST";
    postMethods.set(method, post);
  }
  return post;
};

/** Options for {@link createPartnerEdge}. */
export interface PartnerEdgeOptions {
  /** Forked once per request: the request's unit of work. */
  orm: Orm;
  apiKeys: ApiKeyService;
  rateLimiter: RateLimiter;
  /** Each key's limits: its own, its partner's, or the defaults (dedicated capacity, CONTRACT.md §8). */
  limits: LimitsService;
  idempotency: IdempotencyService;
  metrics?: Metrics;
  /** Portal sessions in place of an API key (docs/portal.md); without it, API keys only. */
  portal?: PortalGate;
  /**
   * Services a portal session may call and an API key may not (`partner.v1.ApiKeyService`): a working key is
   * refused here, once authenticated and before anything else runs, so an idempotency key's stored answer is
   * never replayed to an API key.
   */
  sessionOnly?: ReadonlySet<string>;
  /**
   * Work that must not hold a database connection (a destination's DNS), by {@link methodKey}: run before any
   * transaction opens. An idempotent retry whose answer is stored is replayed without it.
   */
  prechecks?: ReadonlyMap<string, Precheck>;
}

/** The partner listener's edge: API key, the key's limits and its rate limit, then idempotency keys on POSTs. */
export function createPartnerEdge({
  orm,
  apiKeys,
  rateLimiter,
  limits,
  idempotency,
  metrics,
  portal,
  sessionOnly,
  prechecks,
}: PartnerEdgeOptions): Edge {
  /** The idempotency key of a POST, checked for form (400 before any other work), or undefined. */
  const idempotencyKeyOf = (call: EdgeCall): string | undefined => {
    const key = call.requestHeader.get("idempotency-key");
    if (key === null || !isPost(call.method)) return undefined;
    idempotency.validateKey(key);
    return key;
  };

  /** The handler in its unit of work: a portal write in its audit transaction, an idempotent one in its own. */
  const run = async (call: EdgeCall, request: Message, handler: () => Promise<unknown>): Promise<unknown> => {
    // A write made with a portal session runs inside the audit log's transaction (entered once).
    if (portal?.auditsOnce(call)) return portal.audited(call, request, () => run(call, request, handler));
    const key = idempotencyKeyOf(call);
    if (key === undefined) return handler();
    const { method } = call;
    const em = emOf(call.values);
    const result = await idempotency.run(
      em,
      callerOf(call.values),
      key,
      `${method.parent.typeName}/${method.name}`,
      toBinary(method.input, request as never),
      async (tx) => {
        // The handler's writes join the transaction that stores the idempotency record.
        call.values.set(kEm, tx);
        try {
          return toBinary(method.output, create(method.output, (await handler()) as never));
        } finally {
          call.values.set(kEm, em);
        }
      },
    );
    const response = fromBinary(method.output, result.response);
    if (!result.replayed) return response;
    call.responseHeader.set("idempotent-replayed", "true");
    call.values.set(kReplay, response);
    return handler();
  };

  return {
    async admit(call) {
      let em: Em | undefined;
      let caller: Caller | undefined;
      // Forked on first use: a request served from caches (a known key, the key document) never forks one.
      const unit = (): Em => {
        if (!em) {
          em = orm.em.fork();
          if (caller) scopeToTenant(em, caller);
        }
        return em;
      };
      call.values.set(kEm, unit);
      // No Authorization header and a portal session cookie: a person in the portal (a header lookup more).
      const session = portal?.tokenOf(call.requestHeader);
      if (session === undefined && sessionOnly?.has(call.method.parent.typeName)) {
        // Authentication comes before authorization: a missing, malformed, unknown, revoked or expired key is
        // the 401 every route answers, and only a key that works is told that it may not do this.
        await apiKeys.authenticate(unit, bearer(call.requestHeader));
        throw new ApiError("permission_denied", "API keys are managed in the partner portal.");
      }
      caller =
        portal && session !== undefined
          ? await portal.admit(call, unit(), session)
          : await apiKeys.authenticate(unit, bearer(call.requestHeader));
      call.values.set(kCaller, caller);
      // The tenancy boundary: every partner-owned entity this request reads or writes is the caller's.
      if (em) scopeToTenant(em, caller);
      const cls = rateClassOf(call.method);
      // Resolved once here, so handlers limiting expensive work read them from the context, not the database.
      const own = await limits.forCaller(unit, caller);
      call.values.set(kLimits, own);
      const decision = await rateLimiter.take(unit, caller.keyId, cls, own[cls]);
      const headers = rateLimitHeaders(cls, decision);
      for (const [k, v] of Object.entries(headers)) call.responseHeader.set(k, v);
      if (!decision.allowed) {
        metrics?.rateLimitRejections.inc({ class: cls });
        throw new ApiError("rate_limited", undefined, {
          retryAfterSeconds: decision.retryAfterSeconds,
          headers,
        });
      }
    },

    async confirm(call) {
      const session = portal?.tokenOf(call.requestHeader);
      if (portal && session !== undefined) await portal.admit(call, emOf(call.values), session);
      else await apiKeys.authenticate(lazyEmOf(call.values), bearer(call.requestHeader));
    },

    async invoke(call, request, handler) {
      const precheck = prechecks?.get(methodKey(call.method));
      if (precheck) {
        // A retry whose answer is stored is replayed (or refused as a reuse) by `run`, whatever the network says
        // now; anything else does its network work here, holding no connection (platform/network-guard.ts).
        const key = idempotencyKeyOf(call);
        const stored = key !== undefined && (await idempotency.answered(emOf(call.values), key));
        if (!stored) await precheck(request, call.values);
      }
      return run(call, request, handler);
    },
  };
}

/**
 * Wraps a service implementation so that a replayed idempotent request returns the stored response
 * through the normal call path, without running the method again.
 */
export function replayable<T extends object>(impl: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(impl)) {
    wrapped[name] =
      typeof fn === "function"
        ? (req: unknown, ctx: { values: ContextValues }) => ctx.values.get(kReplay) ?? fn.call(impl, req, ctx)
        : fn;
  }
  return wrapped as T;
}

/** The internal listener's edge: the service token, compared in constant time; one EntityManager per call. */
export function createInternalEdge(token: string, orm: Orm): Edge {
  return {
    async admit(call) {
      const presented = bearer(call.requestHeader);
      if (!presented)
        throw new ApiError("unauthenticated", "Send the service token as `Authorization: Bearer …`.");
      if (!constantTimeEqualStrings(presented, token)) {
        throw new ApiError("unauthenticated", "The service token is not valid.");
      }
      call.values.set(kEm, orm.em.fork());
    },
    invoke: (_call, _request, handler) => handler(),
  };
}
