import type { Em, Orm } from "../platform/db/orm.ts";
import type { Replicas } from "../platform/db/replicas.ts";
import { rateClassOf } from "../platform/http/rules.ts";
import { kCaller, kUnit } from "../platform/rpc/context.ts";
import type { Edge, RequestValidator } from "../platform/rpc/pipeline.ts";
import { type Caller, scopeToTenant } from "../platform/tenancy.ts";
import { type Authentication, authenticate, reauthenticate } from "./authentication.ts";
import { precheck, runWrite, type Writes } from "./idempotency.ts";
import { applyRateLimit, type RateLimits } from "./limits.ts";

/** Options for {@link createPartnerEdge}: each concern's own, and the ORM each request's unit of work forks. */
export interface PartnerEdgeOptions extends Authentication, RateLimits, Writes {
  /** Forked once per request, on first use: the request's unit of work. */
  orm: Orm;
  /** Streaming replicas for the reads of GET methods (DATABASE_REPLICA_URLS), when there are any. */
  replicas?: Replicas;
  validate: RequestValidator;
}

/**
 * The partner listener's edge, in order: the request's unit of work (read or write by the method's rate
 * class), the caller (API key or portal session) and the tenancy boundary, the key's limits and its rate
 * limit; then, once the request is decoded, the contract's rules, prechecks and the write's unit of work
 * (idempotency key, portal audit).
 */
export function createPartnerEdge(o: PartnerEdgeOptions): Edge {
  return {
    async admit(call) {
      let em: Em | undefined;
      let caller: Caller | undefined;
      // Forked on first use: a request served from caches (a known key, the key document) never forks one.
      const unit = (): Em => {
        if (!em) {
          em = o.orm.em.fork();
          if (caller) scopeToTenant(em, caller);
        }
        return em;
      };
      const kind = rateClassOf(call.method);
      const { replicas } = o;
      // Reads of GET methods may run on a replica, in the caller's tenant (platform/db/replicas.ts).
      const scoped = (em: Em) => {
        if (caller) scopeToTenant(em, caller);
      };
      const replica =
        replicas && kind === "read"
          ? <T>(fn: (em: Em) => Promise<T>) => replicas.read(unit, scoped, fn)
          : undefined;
      const replicaAt =
        replicas && kind === "read"
          ? <T>(fn: (em: Em, after: string | null) => Promise<T>) => replicas.readAt(unit, scoped, fn)
          : undefined;
      call.values.set(kUnit, { kind, em: unit, replica, replicaAt });
      caller = await authenticate(o, call, unit);
      call.values.set(kCaller, caller);
      // The tenancy boundary: every partner-owned entity this request reads or writes is the caller's.
      if (em) scopeToTenant(em, caller);
      await applyRateLimit(o, call, unit, caller);
    },
    confirm: (call) => reauthenticate(o, call),
    async invoke(call, request, handler) {
      o.validate(call.method.input, request);
      await precheck(o, call, request);
      return runWrite(o, call, request, handler);
    },
  };
}
