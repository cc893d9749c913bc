import { UniqueConstraintViolationException } from "@mikro-orm/core";
import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { randomBase62, sha256, sha256Hex } from "../platform/crypto/tokens.ts";
import type { ChangeFeed } from "../platform/db/change-feed.ts";
import type { Em, LazyEm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { ApiKeyRow } from "./api-key.entity.ts";
import { apiKeyRepository as repo } from "./api-key.repository.ts";

/** A key's lifecycle state at a given time. */
export type ApiKeyStatus = "ACTIVE" | "EXPIRING" | "EXPIRED" | "REVOKED";

/** The state of `row` at `now`. */
export function apiKeyStatus(row: Pick<ApiKeyRow, "revokedAt" | "expiresAt">, now: Date): ApiKeyStatus {
  if (row.revokedAt) return "REVOKED";
  if (row.expiresAt) return row.expiresAt <= now ? "EXPIRED" : "EXPIRING";
  return "ACTIVE";
}

const KEY_SHAPE = /^sk_(sandbox|live)_[0-9A-Za-z]{32}$/;
const ENV_OF_KEY = { sandbox: "sandbox", live: "production" } as const;
const KEY_WORD: Record<Environment, string> = { sandbox: "sandbox", production: "live" };
/** How long a key is cached by hash. Changes reach every instance at once through the change feed. */
const CACHE_MS = 60 * ms.second;
const CACHE_MAX = 50_000;
/** How many unknown digests are remembered (bounded: a flood of guesses cannot grow memory). */
const UNKNOWN_MAX = 10_000;
const DEFAULT_ROLL_HOURS = 24;
const MAX_ROLL_HOURS = 168;

/** Options for {@link createApiKeyService}. */
export interface ApiKeyServiceOptions {
  clock: Clock;
  /** Keys are issued to partners that exist. */
  partners: PartnerService;
  changes: ChangeFeed;
}

/** What authentication needs of a key row, copied out of the ORM entity so the hot path reads plain fields. */
type KeyState = Pick<ApiKeyRow, "id" | "partnerId" | "environment" | "revokedAt" | "expiresAt">;

interface Cached {
  row: KeyState;
  at: number;
}

/** Issues, rolls, revokes and checks partner API keys (CONTRACT.md §2). */
export type ApiKeyService = ReturnType<typeof createApiKeyService>;

/** Creates the API key service. */
export function createApiKeyService({ clock, changes, partners }: ApiKeyServiceOptions) {
  const byHash = new Map<string, Cached>();
  // Digests no key has, so a flood of guessed keys costs one query per digest, not one per request. Any
  // change to any key (an issue or a roll makes a new digest valid) drops them all, on every instance.
  const unknown = new Map<string, number>();
  // Bumped by every change. A lookup caches what it read only if no change arrived while it was in flight:
  // a read that began before a revocation committed must not put the key back for the cache's lifetime.
  let generation = 0;
  changes.subscribe("api_key", (id) => {
    generation++;
    unknown.clear();
    if (id === "*") return byHash.clear();
    for (const [hash, entry] of byHash) if (entry.row.id === id) byHash.delete(hash);
  });

  const mint = (partnerId: string, environment: Environment, now: Date) => {
    const key = `sk_${KEY_WORD[environment]}_${randomBase62(32)}`;
    const row: ApiKeyRow = {
      id: newId("key"),
      partnerId,
      environment,
      keyHash: sha256(key),
      prefix: key.slice(0, 12),
      createdAt: now,
      expiresAt: null,
      revokedAt: null,
      rolledTo: null,
    };
    return { key, row };
  };

  const loadOrThrow = async (em: Em, keyId: string, lock: boolean): Promise<ApiKeyRow> => {
    const row = isId("key", keyId) ? await repo.find(em, keyId, lock) : null;
    if (!row) throw new ApiError("not_found", `No API key ${keyId}.`);
    return row;
  };

  return {
    /** Issues the first key of a partner in an environment. The secret is returned here only. */
    async issue(
      em: Em,
      partnerId: string,
      environment: Environment,
    ): Promise<{ row: ApiKeyRow; key: string }> {
      await partners.get(em, partnerId);
      const minted = mint(partnerId, environment, clock.now());
      try {
        await em.transactional(async (tx) => {
          await repo.insert(tx, minted.row);
          await repo.announce(tx, minted.row.id);
        });
      } catch (err) {
        if (err instanceof UniqueConstraintViolationException) throw new ApiError("api_key_exists");
        throw err;
      }
      changes.emitLocal("api_key", minted.row.id);
      return minted;
    },

    /**
     * Replaces an active key. The old key keeps working until `now + expiresInHours` so the partner can
     * deploy the new one; both are valid in between (CONTRACT.md §2).
     */
    async roll(em: Em, keyId: string, expiresInHours = DEFAULT_ROLL_HOURS) {
      if (!Number.isInteger(expiresInHours) || expiresInHours < 0 || expiresInHours > MAX_ROLL_HOURS) {
        throw new ApiError(
          "invalid_argument",
          `expires_in_hours must be an integer from 0 to ${MAX_ROLL_HOURS}.`,
        );
      }
      const rolled = await em.transactional(async (em) => {
        const old = await loadOrThrow(em, keyId, true);
        const now = clock.now();
        if (apiKeyStatus(old, now) !== "ACTIVE") {
          throw new ApiError(
            "conflict",
            `API key ${keyId} is ${apiKeyStatus(old, now).toLowerCase()}: only an active key can be rolled.`,
          );
        }
        const minted = mint(old.partnerId, old.environment, now);
        old.expiresAt = new Date(now.getTime() + expiresInHours * ms.hour);
        // The old key must leave the "one active key" index before the new one enters it.
        await repo.save(em);
        await repo.insert(em, minted.row);
        old.rolledTo = minted.row.id;
        await repo.save(em);
        await repo.announce(em, old.id);
        return { old, row: minted.row, key: minted.key };
      });
      // This instance stops honouring the old key's unlimited life before the caller hears of the roll; the
      // NOTIFY tells the others a moment later.
      changes.emitLocal("api_key", rolled.old.id);
      return rolled;
    },

    /** Revokes a key at once, on every instance (the change feed drops it from every cache). */
    async revoke(em: Em, keyId: string): Promise<ApiKeyRow> {
      const row = await em.transactional(async (em) => {
        const found = await loadOrThrow(em, keyId, true);
        if (!found.revokedAt) {
          found.revokedAt = clock.now();
          await repo.save(em);
          await repo.announce(em, found.id);
        }
        return found;
      });
      changes.emitLocal("api_key", row.id);
      return row;
    },

    /** A key by id (never its secret), or `not_found`. */
    async get(em: Em, keyId: string): Promise<ApiKeyRow> {
      return loadOrThrow(em, keyId, false);
    },

    /** A partner's keys, newest first. */
    async list(em: Em, partnerId: string): Promise<ApiKeyRow[]> {
      await partners.get(em, partnerId);
      return repo.listForPartner(em, partnerId);
    },

    /**
     * True when an `Authorization: Bearer` header carries a key this instance has found valid before (it is in
     * the cache, however old: revocations leave it through the change feed). No query, so it can decide before
     * anything is spent whether a request from an address that keeps failing to authenticate is a partner's.
     */
    knows(authorization: string | undefined): boolean {
      const m = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
      if (!m?.[1] || !KEY_SHAPE.test(m[1])) return false;
      return byHash.has(sha256Hex(m[1]));
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
      const hex = sha256Hex(secret);
      const nowMs = Date.now();
      let row: KeyState | null | undefined;
      const hit = byHash.get(hex);
      const missedAt = unknown.get(hex);
      if (hit && changes.healthy && nowMs - hit.at < CACHE_MS) {
        row = hit.row;
      } else if (missedAt !== undefined && changes.healthy && nowMs - missedAt < CACHE_MS) {
        row = null;
      } else {
        const readAt = generation;
        // The lookup is by digest, so comparing secrets never happens character by character.
        const found = await repo.findByHash(em(), Buffer.from(hex, "hex"));
        row = found && {
          id: found.id,
          partnerId: found.partnerId,
          environment: found.environment,
          revokedAt: found.revokedAt,
          expiresAt: found.expiresAt,
        };
        // Remembered only if no key changed while this lookup ran (else answer from what was read).
        if (readAt === generation && changes.healthy) {
          if (row) {
            if (byHash.size >= CACHE_MAX) byHash.clear();
            byHash.set(hex, { row, at: nowMs });
          } else {
            if (unknown.size >= UNKNOWN_MAX) unknown.clear();
            unknown.set(hex, nowMs);
          }
        }
      }
      if (!row || row.environment !== ENV_OF_KEY[shape[1] as "sandbox" | "live"])
        throw new ApiError("invalid_api_key");
      const status = apiKeyStatus(row, clock.now());
      if (status === "REVOKED") throw new ApiError("api_key_revoked");
      if (status === "EXPIRED") throw new ApiError("api_key_expired");
      return { keyId: row.id, partnerId: row.partnerId, environment: row.environment };
    },
  };
}
