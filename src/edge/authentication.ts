import type { ApiKeyService } from "../apikeys/api-key.service.ts";
import type { LazyEm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { emOf, kOutcome, lazyEmOf } from "../platform/rpc/context.ts";
import { bearer, type EdgeCall } from "../platform/rpc/pipeline.ts";
import type { Caller } from "../platform/tenancy.ts";
import type { PortalGate } from "../portal/portal.gate.ts";

/** Who may call the partner services: API keys, and portal sessions where the portal is served. */
export interface Authentication {
  apiKeys: ApiKeyService;
  /** Portal sessions in place of an API key (docs/portal.md); without it, API keys only. */
  portal?: PortalGate;
  /**
   * Services a portal session may call and an API key may not (`partner.v1.ApiKeyService`): a working key is
   * refused here, once authenticated and before anything else runs, so an idempotency key's stored answer is
   * never replayed to an API key.
   */
  sessionOnly?: ReadonlySet<string>;
}

/**
 * The caller of a partner call: a portal session (no `Authorization` header and the portal's cookie) or an API
 * key. Authentication comes before authorization: a missing, malformed, unknown, revoked or expired key is the
 * 401 every route answers, and only a key that works is told that it may not do this.
 */
export function authenticate(o: Authentication, call: EdgeCall, em: LazyEm): Promise<Caller> {
  return noting(call, identify(o, call, em));
}

async function identify(o: Authentication, call: EdgeCall, em: LazyEm): Promise<Caller> {
  const session = o.portal?.tokenOf(call.requestHeader);
  if (session === undefined && o.sessionOnly?.has(call.method.parent.typeName)) {
    await o.apiKeys.authenticate(em, bearer(call.requestHeader));
    throw new ApiError("permission_denied", "API keys are managed in the partner portal.");
  }
  if (o.portal && session !== undefined) return o.portal.admit(call, em(), session);
  const caller = await o.apiKeys.authenticate(em, bearer(call.requestHeader));
  // A call made with a partner's key goes to its request log once answered (edge/request-id.ts).
  const outcome = call.values.get(kOutcome);
  if (outcome) outcome.keyCaller = caller;
  return caller;
}

/**
 * The credentials checked again once a body has arrived (the REST face admits before reading it), so a key
 * revoked or rolled while the body was on its way does not act. A key still cached makes it a lookup in memory.
 */
export function reauthenticate(o: Authentication, call: EdgeCall): Promise<void> {
  return noting(call, reidentify(o, call));
}

async function reidentify(o: Authentication, call: EdgeCall): Promise<void> {
  const session = o.portal?.tokenOf(call.requestHeader);
  if (o.portal && session !== undefined) await o.portal.admit(call, emOf(call.values), session);
  else await o.apiKeys.authenticate(lazyEmOf(call.values), bearer(call.requestHeader));
}

/**
 * Tells the per-address limit on failed authentications (edge/address-guard.ts) how the credentials fared: taken
 * (or not decided, the database away), and the token the call holds goes back at once; or refused, noted on the
 * call for when it is answered (on gRPC every answer is HTTP 200).
 */
async function noting<T>(call: EdgeCall, work: Promise<T>): Promise<T> {
  const outcome = call.values.get(kOutcome);
  try {
    const result = await work;
    outcome?.credentialsTaken?.();
    return result;
  } catch (err) {
    if (!(outcome && err instanceof ApiError && err.httpStatus === 401)) {
      outcome?.credentialsTaken?.();
      throw err;
    }
    outcome.unauthenticated = true;
    // Let in without a token from an address over its budget (edge/address-guard.ts): refused as a guess is.
    if (outcome.overBudgetRetryAfter !== undefined)
      throw new ApiError(
        "rate_limited",
        "Too many failed authentications from your address; try again shortly.",
        {
          retryAfterSeconds: outcome.overBudgetRetryAfter,
        },
      );
    throw err;
  }
}
