import { type ContextValues, createContextKey, createContextValues } from "@connectrpc/connect";
import type { Limits } from "../../ratelimit/limits.ts";
import type { Em, LazyEm } from "../db/orm.ts";
import type { Logger } from "../logger.ts";
import type { Caller } from "../tenancy.ts";

/** The request's `req_` id, set at the HTTP layer before anything else runs. */
export const kRequestId = createContextKey<string>("", { description: "request id" });

/** The client's address as the listener saw it (the socket's remote address), for the audit log and throttles. */
export const kClientAddress = createContextKey<string>("", { description: "client address" });

/** The host the request was addressed to (`Host`, or HTTP/2's `:authority`), for same-origin checks. */
export const kRequestHost = createContextKey<string>("", { description: "request host" });

/** A request's first context values, on every face: its id, the client's address and the host it was sent to. */
export function requestValues(
  requestId: string,
  req: { socket?: { remoteAddress?: string } | null; headers: Record<string, string | string[] | undefined> },
): ContextValues {
  return createContextValues()
    .set(kRequestId, requestId)
    .set(kClientAddress, req.socket?.remoteAddress ?? "")
    .set(kRequestHost, String(req.headers.host ?? req.headers[":authority"] ?? ""));
}

/** The authenticated partner caller; set by the edge on the partner listener. */
export const kCaller = createContextKey<Caller | undefined>(undefined, { description: "caller" });

/** The caller's limits (its key's own, its partner's, or the defaults); set by the edge with the caller. */
export const kLimits = createContextKey<Limits | undefined>(undefined, { description: "limits" });

/**
 * The request's unit of work: one EntityManager the edge forks per request (on first use), on every face. While an
 * idempotent request runs, it is the transaction that also stores the idempotency record, so the handler's
 * writes join it. Handlers pass it to the services; nothing below forks its own.
 */
export const kEm = createContextKey<Em | LazyEm | undefined>(undefined, { description: "entity manager" });

/**
 * The stored response of an idempotent request being replayed: handlers wrapped with `replayable` return
 * it instead of running again (so the protocol layers still frame the response as usual).
 */
export const kReplay = createContextKey<unknown>(undefined, { description: "idempotent replay" });

/** A logger bound to the request id. */
export const kLogger = createContextKey<Logger | undefined>(undefined, { description: "logger" });

/** The request's EntityManager; the edge guarantees it is set. */
export function emOf(values: ContextValues): Em {
  const em = values.get(kEm);
  if (!em) throw new Error("handler reached without the request's EntityManager");
  return typeof em === "function" ? em() : em;
}

/**
 * The request's EntityManager, forked only when first called: for a handler whose answer is usually cached
 * (the key document), so a cache hit costs no fork.
 */
export function lazyEmOf(values: ContextValues): LazyEm {
  const em = values.get(kEm);
  if (!em) throw new Error("handler reached without the request's EntityManager");
  return typeof em === "function" ? em : () => em;
}

/** The caller of a partner handler; the edge guarantees it is set. */
export function callerOf(values: ContextValues): Caller {
  const caller = values.get(kCaller);
  if (!caller) throw new Error("partner handler reached without an authenticated caller");
  return caller;
}

/** The limits of a partner handler's caller; the edge guarantees they are set. */
export function limitsOf(values: ContextValues): Limits {
  const limits = values.get(kLimits);
  if (!limits) throw new Error("partner handler reached without the caller's limits");
  return limits;
}
