import { AsyncLocalStorage } from "node:async_hooks";
import diagnostics from "node:diagnostics_channel";

/**
 * The rule "no network wait while a database connection is held" (ARCHITECTURE.md "Past one database
 * server"), made a check rather than a convention. Every database transaction runs its callback inside
 * {@link whileHolding} (the ORM's entity manager does it for every `transactional`), and every outbound
 * call reports itself here as it starts: HTTP through `node:http`/`node:https` and `fetch` (Node's own
 * diagnostics channels, so no call site can forget), and destination DNS lookups (`vetHost`). An outbound call
 * that starts inside a transaction's async context is a bug: a partner's slow DNS or a provider's slow answer
 * would hold a pooled connection, and enough of them would drain the pool for everyone (a 503 for every
 * tenant). The process logs it at `error` (`network call started inside a database transaction`) and counts
 * it; the test suite fails any test in which it happens (test/support/network-tripwire.ts).
 */

/** What an async context holds while it runs: set for the length of each database transaction. */
const holding = new AsyncLocalStorage<string>();

/** Runs `fn` as work that holds a database connection: every outbound call it starts is a violation. */
export function whileHolding<T>(what: string, fn: () => T): T {
  return holding.run(what, fn);
}

/** What the database connection of the current async context is held for, if one is. */
export function heldConnection(): string | undefined {
  return holding.getStore();
}

/** An outbound call that started while a database connection was held. */
export interface NetworkWhileHolding {
  /** `dns`, `http` or `fetch`. */
  kind: string;
  /** Where it went: a host name, or the method and host (never a path: a webhook URL's path may be a secret). */
  target: string;
  /** What held the connection (`transaction`). */
  holding: string;
  /** Where the call started, for the bug report. */
  stack: string;
}

/** The log line every violation is reported with (tests look for it in child processes' logs). */
export const NETWORK_WHILE_HOLDING = "network call started inside a database transaction";

const listeners = new Set<(v: NetworkWhileHolding) => void>();

let exempt: (target: string) => boolean = () => false;

/**
 * Calls for which `test` answers true (given the call's target, as {@link networkStarting} has it) are not the
 * caller's: the tracing SDK's exports to its collector, sent from a timer that may have been set while a span
 * ended inside a transaction, and so carry its async context though they hold nothing
 * ({@link ../platform/telemetry.ts}).
 */
export function exemptNetworkCalls(test: (target: string) => boolean): void {
  exempt = test;
}

/**
 * Reports an outbound call that is about to start. Call sites of the service's own resolvers call it; HTTP and
 * `fetch` are seen through diagnostics channels. Outside a transaction it costs one AsyncLocalStorage read.
 */
export function networkStarting(kind: string, target: string): void {
  const what = holding.getStore();
  if (what === undefined || listeners.size === 0 || exempt(target)) return;
  const stack = (new Error().stack ?? "").split("\n").slice(2, 14).join("\n");
  const violation = { kind, target, holding: what, stack };
  for (const listener of listeners) listener(violation);
}

let subscribed = false;
const onHttp = (message: unknown) => {
  const req = (message as { request?: { method?: string; host?: string } }).request;
  networkStarting("http", `${req?.method ?? ""} ${req?.host ?? ""}`);
};
const onFetch = (message: unknown) => {
  const req = (message as { request?: { method?: string; origin?: string } }).request;
  networkStarting("fetch", `${req?.method ?? ""} ${req?.origin ?? ""}`);
};

/**
 * Calls `listener` for every outbound call started while a database connection is held; returns what stops
 * it. The diagnostics channels are subscribed on the first listener (they cost nothing before).
 */
export function onNetworkWhileHolding(listener: (v: NetworkWhileHolding) => void): () => void {
  listeners.add(listener);
  if (!subscribed) {
    subscribed = true;
    diagnostics.subscribe("http.client.request.start", onHttp);
    diagnostics.subscribe("undici:request:create", onFetch);
  }
  return () => {
    listeners.delete(listener);
  };
}
