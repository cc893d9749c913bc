import type { Message } from "@bufbuild/protobuf";
import { type ContextValues, createContextKey, createContextValues } from "@connectrpc/connect";
import type { Em, LazyEm } from "../db/orm.ts";
import { ApiError } from "../errors.ts";
import { type AddressedRequest, clientAddressOf } from "../http/client-address.ts";
import type { Caller } from "../tenancy.ts";

// The context keys every face sets and every handler reads, in their own file so that the edge, the faces
// and the features' handlers all import them from below (connect-es keeps its keys apart for the same reason).

/** The request's `req_` id, set at the HTTP layer before anything else runs. */
export const kRequestId = createContextKey<string>("", { description: "request id" });

/** The client's address as the listener saw it (the socket's remote address), for the audit log and throttles. */
export const kClientAddress = createContextKey<string>("", { description: "client address" });

/** The host the request was addressed to (`Host`, or HTTP/2's `:authority`), for same-origin checks. */
export const kRequestHost = createContextKey<string>("", { description: "request host" });

/** What the edge learnt of a call that the HTTP layer reads once the call is answered, whichever its face. */
export interface CallOutcome {
  /** The credentials were refused (on gRPC the HTTP status is 200 whatever the call's outcome). */
  unauthenticated: boolean;
  /**
   * Set by the HTTP layer when the call holds a token of its address's budget of failed authentications:
   * called once its credentials are taken, so the token goes back then, not when the answer ends (a slow
   * body or a long read would otherwise hold it, and a partner's calls in flight would crowd out its next key).
   */
  credentialsTaken?: () => void;
  /**
   * Set by the HTTP layer for a call let in without a token because its key is known (or being looked up), from
   * an address over its budget of failed authentications: should the key be refused after all, the call is
   * answered `429 rate_limited` with this `Retry-After`, as any other call from the address is.
   */
  overBudgetRetryAfter?: number;
  /** The partner, environment and key of a call made with an API key, once the key was taken (request log). */
  keyCaller?: Caller;
  /** The error the call was answered with, in the contract's form whatever the face (request log). */
  error?: ApiError;
}

const OUTCOME = Symbol("callOutcome");
type WithOutcome = { [OUTCOME]?: CallOutcome };

/** The outcome record of the call `req` carries, if anything asked for one. */
export function outcomeIfAny(req: object): CallOutcome | undefined {
  return (req as WithOutcome)[OUTCOME];
}

/** The outcome record of the call `req` carries (one per request, made on first ask). */
export function callOutcomeOf(req: object): CallOutcome {
  const tagged = req as WithOutcome;
  tagged[OUTCOME] ??= { unauthenticated: false };
  return tagged[OUTCOME];
}

/** The call's {@link CallOutcome}, for the edge to fill in. */
export const kOutcome = createContextKey<CallOutcome | undefined>(undefined, { description: "call outcome" });

/** A request's first context values, on every face: its id, the client's address and the host it was sent to. */
export function requestValues(
  requestId: string,
  req: AddressedRequest & { headers: Record<string, string | string[] | undefined> },
): ContextValues {
  return createContextValues()
    .set(kRequestId, requestId)
    .set(kClientAddress, clientAddressOf(req))
    .set(kRequestHost, String(req.headers.host ?? req.headers[":authority"] ?? ""))
    .set(kOutcome, callOutcomeOf(req));
}

/** The authenticated partner caller; set by the edge on the partner listener. */
export const kCaller = createContextKey<Caller | undefined>(undefined, { description: "caller" });

/**
 * The unit of work a handler runs in, said by the edge rather than inferred by a service:
 * - `read` and `write`: the request's own EntityManager, forked on first use (a request answered from caches
 *   never forks one); a service opens its own transactions on it;
 * - `idempotent`: a write sent with an `Idempotency-Key`, inside the transaction that also stores the key's
 *   record, so the handler's writes and the stored answer commit together or not at all;
 * - `audited`: a portal member's write, inside the transaction that records it in the audit log.
 * Nothing below the edge forks its own.
 */
export type UnitOfWork =
  | {
      readonly kind: "read" | "write";
      readonly em: LazyEm;
      /**
       * Reads only: runs read-only work on a streaming replica that has replayed everything the primary had
       * committed when it began (or on the primary), when the service has replicas (platform/db/replicas.ts).
       */
      readonly replica?: <T>(fn: (em: Em) => Promise<T>) => Promise<T>;
      /** As `replica`, for one statement that checks the replica itself (platform/db/replicas.ts `readAt`). */
      readonly replicaAt?: <T>(fn: (em: Em, after: string | null) => Promise<T>) => Promise<T>;
    }
  | { readonly kind: "idempotent"; readonly em: Em; readonly key: string }
  | { readonly kind: "audited"; readonly em: Em };

/** The request's {@link UnitOfWork}; set by the edge of each listener before any handler runs. */
export const kUnit = createContextKey<UnitOfWork | undefined>(undefined, { description: "unit of work" });

/** The request's unit of work; the edge guarantees it is set. */
export function unitOf(values: ContextValues): UnitOfWork {
  const unit = values.get(kUnit);
  if (!unit) throw new Error("handler reached without the request's unit of work");
  return unit;
}

/** Runs `fn` in `unit` (a transaction the edge opened), then gives the request its earlier unit back. */
export async function inUnit<T>(values: ContextValues, unit: UnitOfWork, fn: () => Promise<T>): Promise<T> {
  const before = values.get(kUnit);
  values.set(kUnit, unit);
  try {
    return await fn();
  } finally {
    values.set(kUnit, before);
  }
}

/** The request's EntityManager, whichever unit of work it is. */
export function emOf(values: ContextValues): Em {
  const unit = unitOf(values);
  return typeof unit.em === "function" ? unit.em() : unit.em;
}

/**
 * Runs a handler's read-only work on a replica when the edge gave this request one, else on the request's own
 * EntityManager. For the reads of GET methods only: never a read that decides a write, and `fn` writes nothing
 * (on a replica its transaction is read-only). What it returns reflects at least everything committed before the
 * request began, wherever it ran: a revoked consent, the partner's own writes, the change a webhook announced.
 */
export function replicaRead<T>(values: ContextValues, fn: (em: Em) => Promise<T>): Promise<T> {
  const unit = unitOf(values);
  if ((unit.kind === "read" || unit.kind === "write") && unit.replica) return unit.replica(fn);
  return fn(emOf(values));
}

/**
 * As {@link replicaRead}, for read-only work of one statement that checks the replica itself: `fn` gets the
 * primary's WAL position the replica must have applied (null on the primary) and throws `ReplicaBehind` when its
 * statement found the replica short of it (platform/db/replicas.ts).
 */
export function replicaReadAt<T>(
  values: ContextValues,
  fn: (em: Em, after: string | null) => Promise<T>,
): Promise<T> {
  const unit = unitOf(values);
  if ((unit.kind === "read" || unit.kind === "write") && unit.replicaAt) return unit.replicaAt(fn);
  return fn(emOf(values), null);
}

/**
 * The request's EntityManager, forked only when first called: for a handler whose answer is usually cached
 * (the key document), so a cache hit costs no fork.
 */
export function lazyEmOf(values: ContextValues): LazyEm {
  const unit = unitOf(values);
  const em = unit.em;
  return typeof em === "function" ? em : () => em;
}

/**
 * The transaction of an idempotent write: for a method that must never act without a key to retry it safely
 * with (creating a disbursement, CONTRACT.md §6). A request without an `Idempotency-Key` is refused with
 * `400 idempotency_key_required`.
 */
export function idempotentTxOf(values: ContextValues): Em {
  const unit = unitOf(values);
  if (unit.kind !== "idempotent") throw new ApiError("idempotency_key_required");
  return unit.em;
}

/**
 * The stored response of an idempotent request being replayed, on the Connect faces: the bound implementation
 * returns it instead of running again (platform/rpc/binding.ts), so the protocol still frames the response.
 */
export const kReplay = createContextKey<Message | undefined>(undefined, { description: "idempotent replay" });

/** The caller of a partner handler; the edge guarantees it is set. */
export function callerOf(values: ContextValues): Caller {
  const caller = values.get(kCaller);
  if (!caller) throw new Error("partner handler reached without an authenticated caller");
  return caller;
}
