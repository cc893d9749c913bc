/**
 * A bounded, expiring set of keys known to match nothing (unknown page tokens), so that a flood of guesses
 * costs one query per distinct guess rather than one per request. Safe without invalidation only for keys
 * that become valid solely by being minted at random (a 190-bit token nobody can have guessed before it
 * exists); the API key cache drops its own on every key change instead.
 */
export function createUnknownSet(o: { max: number; ttlMs: number; now?: () => number }) {
  const now = o.now ?? (() => Date.now());
  const seen = new Map<string, number>();
  return {
    /** True when `key` was found to match nothing less than `ttlMs` ago. */
    has(key: string): boolean {
      const at = seen.get(key);
      if (at === undefined) return false;
      if (now() - at < o.ttlMs) return true;
      seen.delete(key);
      return false;
    },
    /** Remembers that `key` matches nothing; the oldest entry is forgotten when full. */
    add(key: string): void {
      seen.delete(key);
      if (seen.size >= o.max) seen.delete(seen.keys().next().value as string);
      seen.set(key, now());
    },
  };
}
