import { type ContextValues, createContextKey } from "@connectrpc/connect";
import type { Caller } from "../../apikeys/api-key.service.ts";
import type { Em } from "../db/orm.ts";
import type { Logger } from "../logger.ts";

/** The request's `req_` id, set at the HTTP layer before anything else runs. */
export const kRequestId = createContextKey<string>("", { description: "request id" });

/** The authenticated partner caller; set by the edge on the partner listener. */
export const kCaller = createContextKey<Caller | undefined>(undefined, { description: "caller" });

/**
 * The transaction a write must join, when the edge opened one (idempotent requests: the idempotency
 * record is written in the same transaction as the change it guards).
 */
export const kTx = createContextKey<Em | undefined>(undefined, { description: "transaction" });

/**
 * The stored response of an idempotent request being replayed: handlers wrapped with `replayable` return
 * it instead of running again (so the protocol layers still frame the response as usual).
 */
export const kReplay = createContextKey<unknown>(undefined, { description: "idempotent replay" });

/** A logger bound to the request id. */
export const kLogger = createContextKey<Logger | undefined>(undefined, { description: "logger" });

/** The caller of a partner handler; the edge guarantees it is set. */
export function callerOf(values: ContextValues): Caller {
  const caller = values.get(kCaller);
  if (!caller) throw new Error("partner handler reached without an authenticated caller");
  return caller;
}
