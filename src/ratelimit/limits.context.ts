import { type ContextValues, createContextKey } from "@connectrpc/connect";
import type { Limits } from "./limits.ts";

export type { Limits } from "./limits.ts";

/**
 * The caller's limits (its key's own, its partner's, or the defaults), resolved once by the edge with the
 * caller, so handlers limiting expensive work read them from the request, not the database.
 */
export const kLimits = createContextKey<Limits | undefined>(undefined, { description: "limits" });

/** The limits of a partner handler's caller; the edge guarantees they are set. */
export function limitsOf(values: ContextValues): Limits {
  const limits = values.get(kLimits);
  if (!limits) throw new Error("partner handler reached without the caller's limits");
  return limits;
}
