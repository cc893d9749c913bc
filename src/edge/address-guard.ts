import { ApiError } from "../platform/errors.ts";
import { clientAddressOf } from "../platform/http/client-address.ts";
import type { Handler } from "../platform/http/listener.ts";
import { writeRestError } from "../platform/http/rest-errors.ts";
import type { AnyRequest } from "../platform/http/transcoder.ts";
import { callOutcomeOf } from "../platform/rpc/context.ts";
import { writeRpcError } from "../platform/rpc/early-errors.ts";
import type { AddressGuard } from "../ratelimit/limiters.service.ts";
import { FIXED_PATHS, PAGE_PREFIXES, PROCEDURE } from "./routes.ts";

/** Set on a request that took a failure's token from its address's bucket on arrival. */
const RESERVED = Symbol("reserved");
/**
 * The client's address as it was on arrival: an HTTP/2 request's socket is gone by the time its response has
 * finished, so its address is read once, here.
 */
const ADDRESS = Symbol("address");
type Reserved = { [RESERVED]?: boolean; [ADDRESS]?: string };

/** The limits per client address of traffic no API key limits (CONTRACT.md §8). */
export interface AddressAdmission {
  guard: AddressGuard;
  /** True for a request whose API key this instance already knows as a partner's (no query to tell). */
  knownKey: (authorization: string | undefined) => boolean;
}

/**
 * Admits a request by its client address, before anything costs a query: the hosted pages are limited per
 * address, and so is an address that keeps failing to authenticate. False when it was answered `429` here.
 */
export function admitAddress(
  { guard, knownKey }: AddressAdmission,
  req: Parameters<Handler>[0],
  res: Parameters<Handler>[1],
  requestId: string,
): boolean {
  const path = (req.url ?? "").split("?")[0] ?? "";
  const address = clientAddressOf(req);
  (req as Reserved)[ADDRESS] = address;
  const page = PAGE_PREFIXES.some((prefix) => path.startsWith(prefix));
  if (!page && FIXED_PATHS.has(path)) return true;
  if (!page && knownKey(req.headers.authorization)) {
    // A key this instance has found before, or is looking up now, costs no query beyond that one: the call takes
    // no token, so a partner's calls in flight never crowd out its next key, nor does another client's guessing
    // lock a partner out. From an address over its budget it is answered 429 should the key be refused after all
    // (edge/authentication.ts), as a guess would be.
    const budget = guard.failuresLeft(address);
    if (!budget.allowed) callOutcomeOf(req).overBudgetRetryAfter = budget.retryAfterSeconds;
    return true;
  }
  // Any other request that will authenticate takes a failure's token on arrival, given back once its key is
  // taken: a burst of guesses sent at once cannot all pass the check before the first is charged (they would
  // each cost a query, and hold the pool), whatever the bucket had refilled to.
  const decision = page ? guard.takePage(address) : guard.reserveFailure(address);
  if (decision.allowed) {
    if (!page) {
      (req as Reserved)[RESERVED] = true;
      callOutcomeOf(req).credentialsTaken = () => {
        if (!(req as Reserved)[RESERVED]) return;
        (req as Reserved)[RESERVED] = false;
        guard.refund(address);
      };
    }
    return true;
  }
  const refusal = new ApiError(
    "rate_limited",
    page
      ? "Too many requests from your address; try again shortly."
      : "Too many failed authentications from your address; try again shortly.",
    { retryAfterSeconds: decision.retryAfterSeconds },
  );
  // A Connect, gRPC-Web or gRPC call is answered in its own protocol's error form.
  if (PROCEDURE.test(path)) writeRpcError(req, res, refusal, requestId);
  else writeRestError(res, refusal, requestId);
  return false;
}

/**
 * A failed authentication is charged to the client's address: a request that took a token on arrival keeps it
 * spent when it failed and gives it back otherwise (at once when its credentials were taken, else here); one that
 * gave it back, or took none, and failed after all (a key revoked while its body arrived) is charged now.
 */
export function settleAddress(guard: AddressGuard, req: AnyRequest, status: number): void {
  const reserved = (req as Reserved)[RESERVED];
  const failed = status === 401 || callOutcomeOf(req).unauthenticated;
  const address = (req as Reserved)[ADDRESS] ?? clientAddressOf(req);
  if (reserved && !failed) guard.refund(address);
  else if (!reserved && failed) guard.failed(address);
}
