/**
 * A count of work in flight per key, in this instance's memory (docs/rate-limits.md "Limits on expensive
 * work"). It bounds what one key can hold at once on one instance, so that a refusal costs no query; across
 * instances the bound adds up (N per key per instance), which is what spreading load over instances is for.
 */
export interface ConcurrencyLimiter {
  /** The most one key may hold at once, unless the call says otherwise. */
  readonly limit: number;
  /**
   * Takes a slot for `key`: the function that gives it back (calling it again does nothing), or undefined when
   * the key already holds `limit` (the key's own, from its partner's limits; {@link limit} by default). Give it
   * back in a `finally`, so that no path can keep it.
   */
  tryAcquire(key: string, limit?: number): (() => void) | undefined;
  /** Slots `key` holds now. */
  inFlight(key: string): number;
}

/** A {@link ConcurrencyLimiter} allowing `limit` at once per key by default. */
export function createConcurrencyLimiter(limit: number): ConcurrencyLimiter {
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`concurrency limit must be >= 1, got ${limit}`);
  const held = new Map<string, number>();
  return {
    limit,
    tryAcquire(key, own = limit) {
      const n = held.get(key) ?? 0;
      if (n >= own) return undefined;
      held.set(key, n + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (held.get(key) ?? 1) - 1;
        // Idle keys leave the map, so it holds only keys with work in flight.
        if (left > 0) held.set(key, left);
        else held.delete(key);
      };
    },
    inFlight: (key) => held.get(key) ?? 0,
  };
}
