import { ms } from "./clock.ts";
import { sha256 } from "./crypto/tokens.ts";
import type { Em } from "./db/orm.ts";
import { ApiError } from "./errors.ts";

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

/** A hosted page's token: 32 base62 characters. */
const PAGE_TOKEN = /^[0-9A-Za-z]{32}$/;

/**
 * Finds a hosted page's subject by the token in its URL (by the token's SHA-256; the token itself is never
 * stored), answering `not_found` for a malformed or unknown token, from memory after the first miss (10,000
 * at most, 10 minutes: page tokens are random and minted with their page, so a miss cannot turn valid).
 */
export function createPageTokenLookup<T>(
  find: (em: Em, tokenHash: Buffer, lock: boolean) => Promise<T | null | undefined>,
  missing: string,
) {
  const unknown = createUnknownSet({ max: 10_000, ttlMs: 10 * ms.minute });
  return async (em: Em, token: string, lock: boolean): Promise<T> => {
    const wellFormed = PAGE_TOKEN.test(token);
    const row = wellFormed && !unknown.has(token) ? await find(em, sha256(token), lock) : undefined;
    if (row) return row;
    if (wellFormed) unknown.add(token);
    throw new ApiError("not_found", missing);
  };
}
