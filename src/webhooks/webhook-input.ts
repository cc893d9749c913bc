import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { type Environment, tenantOf } from "../platform/tenancy.ts";
import {
  DestinationError,
  type DestinationPolicy,
  localAllowed,
  parseDestination,
  portOf,
  vetHost,
} from "./destination.ts";
import { eventTypes, isValidFilter } from "./event-types.ts";

/** The most event types and filters one subscription takes. */
export const MAX_FILTERS = 20;
const MAX_DESCRIPTION = 500;

/** A subscription's event filters, each known (else `invalid_event_type` naming `field`), without repeats. */
export function checkFilters(filters: string[], field: string): string[] {
  const bad = filters.filter((f) => !isValidFilter(f));
  if (bad.length > 0) {
    throw new ApiError(
      "invalid_event_type",
      `Unknown event type or filter: ${bad.map((b) => JSON.stringify(b)).join(", ")}. Use one of ${eventTypes.join(", ")}, "*", or a prefix wildcard such as "consent.*".`,
      { details: { field, invalid: bad, eventTypes: [...eventTypes] } },
    );
  }
  return [...new Set(filters)];
}

/** A refused destination as the contract's 422, naming the field. */
function asFieldError(err: unknown): never {
  if (err instanceof DestinationError) throw validationFailed({ url: err.message });
  throw err;
}

/**
 * The form of a destination for a subscription of `em`'s environment (https; http only for sandbox, and only
 * with ALLOW_LOCAL_WEBHOOKS). Its address is checked by {@link checkDestination} before the transaction
 * opens, and again at every attempt.
 */
export function checkUrl(destinations: DestinationPolicy, em: Em, raw: string): string {
  try {
    return parseDestination(raw.trim(), localAllowed(destinations, tenantOf(em).environment)).toString();
  } catch (err) {
    return asFieldError(err);
  }
}

/** A description within its length. */
export function checkDescription(d: string): string {
  if (d.length > MAX_DESCRIPTION)
    throw validationFailed({ description: `must be at most ${MAX_DESCRIPTION} characters` });
  return d;
}

/**
 * Resolves a destination's host (within WEBHOOK_DNS_TIMEOUT_MS) and checks every address it has: public only
 * (loopback for sandbox with ALLOW_LOCAL_WEBHOOKS), never this service's own listeners. Refusals are
 * `422 validation_failed` naming `url`.
 */
export async function checkDestination(
  destinations: DestinationPolicy,
  environment: Environment,
  raw: string,
): Promise<void> {
  try {
    const url = parseDestination(raw.trim(), localAllowed(destinations, environment));
    await vetHost(url.hostname, destinations, portOf(url), environment);
  } catch (err) {
    asFieldError(err);
  }
}
