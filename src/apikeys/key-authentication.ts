import { ms } from "../platform/clock.ts";
import { sha256Hex } from "../platform/crypto/tokens.ts";
import type { LazyEm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import type { Caller } from "../platform/tenancy.ts";
import type { ApiKeyRow } from "./api-key.entity.ts";
import { apiKeyRepository as repo } from "./api-key.repository.ts";
import type { ApiKeyServiceOptions } from "./api-key.service.ts";
import { apiKeyStatus } from "./key-status.ts";

const KEY_SHAPE = /^sk_(sandbox|live)_[0-9A-Za-z]{32}$/;
const ENV_OF_KEY = { sandbox: "sandbox", live: "production" } as const;
/** How long a key is cached by hash. Changes reach every instance at once through the change feed. */
const CACHE_MS = 60 * ms.second;
const CACHE_MAX = 50_000;
/** How many unknown digests are remembered (bounded: a flood of guesses cannot grow memory). */
const UNKNOWN_MAX = 10_000;

/** What authentication needs of a key row, copied out of the ORM entity so the hot path reads plain fields. */
type KeyState = Pick<ApiKeyRow, "id" | "partnerId" | "environment" | "revokedAt" | "expiresAt">;

/** This instance's memory of the keys it has looked up, kept true by the change feed. */
interface KeyCache {
  byHash: Map<string, { row: KeyState; at: number }>;
  /**
   * Digests no key has, so a flood of guessed keys costs one query per digest, not one per request. Any
   * change to any key (an issue or a roll makes a new digest valid) drops them all, on every instance.
   */
  unknown: Map<string, number>;
  /**
   * Bumped by every change. A lookup caches what it read only if no change arrived while it was in flight: a
   * read that began before a revocation committed must not put the key back for the cache's lifetime.
   */
  generation: number;
  /**
   * Lookups in flight by digest: a burst of calls with one key this instance has not looked up yet (a new
   * instance, or the cache dropped on the change feed's reconnect) costs one query, not one per call.
   */
  pending: Map<string, Promise<KeyState | null>>;
  /**
   * Digests this instance has found a key for, whatever became of the key since: not dropped when the cache is
   * (the change feed's reconnect, a change to the key), so a partner's calls are never taken for guesses while
   * the cache fills again. Only whether a call may skip the per-address budget reads it, never authentication.
   */
  found: Set<string>;
}

/**
 * Checking partner API keys on the request path (CONTRACT.md §2): each key is looked up by the digest of its
 * secret once, then answered from this instance's cache until a change to it arrives on the change feed.
 */
export function createKeyAuthentication({ clock, changes }: Pick<ApiKeyServiceOptions, "clock" | "changes">) {
  const cache: KeyCache = {
    byHash: new Map(),
    unknown: new Map(),
    generation: 0,
    pending: new Map(),
    found: new Set(),
  };
  changes.subscribe("api_key", (id) => {
    cache.generation++;
    cache.unknown.clear();
    // A lookup that began before this change may have read the key as it was: later calls make their own.
    cache.pending.clear();
    if (id === "*") return cache.byHash.clear();
    for (const [hash, entry] of cache.byHash) if (entry.row.id === id) cache.byHash.delete(hash);
  });

  return {
    /**
     * True when an `Authorization: Bearer` header carries a key this instance has found before (revoked or
     * expired since, perhaps: the call is then refused as any is), or one it is looking up now (the call joins
     * that lookup). Either costs no query beyond one already made or under way, so the per-address budget of
     * failed authentications need not be spent on it (edge/address-guard.ts).
     */
    knows(authorization: string | undefined): boolean {
      const m = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
      if (!m?.[1] || !KEY_SHAPE.test(m[1])) return false;
      const hex = sha256Hex(m[1]);
      return cache.found.has(hex) || cache.pending.has(hex);
    },

    /**
     * Resolves the bearer secret of a request to its caller, or throws the contract's 401 code:
     * `unauthenticated` (missing or malformed), `invalid_api_key` (unknown), `api_key_revoked`,
     * `api_key_expired` (rolled, past its overlap).
     */
    async authenticate(em: LazyEm, secret: string | undefined): Promise<Caller> {
      if (!secret) throw new ApiError("unauthenticated");
      const shape = KEY_SHAPE.exec(secret);
      if (!shape)
        throw new ApiError(
          "unauthenticated",
          "The API key is malformed: expected sk_sandbox_… or sk_live_….",
        );
      const row = await keyState(cache, changes, em, sha256Hex(secret));
      if (!row || row.environment !== ENV_OF_KEY[shape[1] as "sandbox" | "live"])
        throw new ApiError("invalid_api_key");
      const status = apiKeyStatus(row, clock.now());
      if (status === "REVOKED") throw new ApiError("api_key_revoked");
      if (status === "EXPIRED") throw new ApiError("api_key_expired");
      return { keyId: row.id, partnerId: row.partnerId, environment: row.environment };
    },
  };
}

/** The key whose secret has the digest `hex`, or null: from the cache while the change feed vouches for it. */
async function keyState(
  cache: KeyCache,
  changes: ApiKeyServiceOptions["changes"],
  em: LazyEm,
  hex: string,
): Promise<KeyState | null> {
  const nowMs = Date.now();
  const hit = cache.byHash.get(hex);
  const missedAt = cache.unknown.get(hex);
  if (hit && changes.healthy && nowMs - hit.at < CACHE_MS) return hit.row;
  if (missedAt !== undefined && changes.healthy && nowMs - missedAt < CACHE_MS) return null;
  const pending = cache.pending.get(hex);
  if (pending) return pending;
  const lookup = lookUp(cache, changes, em, hex, nowMs);
  cache.pending.set(hex, lookup);
  try {
    return await lookup;
  } finally {
    if (cache.pending.get(hex) === lookup) cache.pending.delete(hex);
  }
}

/** Reads the key with the digest `hex`, and remembers what it found while the change feed vouches for it. */
async function lookUp(
  cache: KeyCache,
  changes: ApiKeyServiceOptions["changes"],
  em: LazyEm,
  hex: string,
  nowMs: number,
): Promise<KeyState | null> {
  const readAt = cache.generation;
  // The lookup is by digest, so comparing secrets never happens character by character.
  const found = await repo.findByHash(em(), Buffer.from(hex, "hex"));
  const row = found && {
    id: found.id,
    partnerId: found.partnerId,
    environment: found.environment,
    revokedAt: found.revokedAt,
    expiresAt: found.expiresAt,
  };
  if (row) {
    if (cache.found.size >= CACHE_MAX) cache.found.clear();
    cache.found.add(hex);
  }
  // Remembered only if no key changed while this lookup ran (else answer from what was read).
  if (readAt === cache.generation && changes.healthy) {
    if (row) {
      if (cache.byHash.size >= CACHE_MAX) cache.byHash.clear();
      cache.byHash.set(hex, { row, at: nowMs });
    } else {
      if (cache.unknown.size >= UNKNOWN_MAX) cache.unknown.clear();
      cache.unknown.set(hex, nowMs);
    }
  }
  return row;
}
