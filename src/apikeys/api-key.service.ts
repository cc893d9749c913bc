import { UniqueConstraintViolationException } from "@mikro-orm/core";
import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { ChangeFeed } from "../platform/db/change-feed.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { ApiKeyRow } from "./api-key.entity.ts";
import { apiKeyRepository as repo } from "./api-key.repository.ts";
import { createKeyAuthentication } from "./key-authentication.ts";
import { apiKeyStatus } from "./key-status.ts";

export { type ApiKeyStatus, apiKeyStatus } from "./key-status.ts";

const KEY_WORD: Record<Environment, string> = { sandbox: "sandbox", production: "live" };
const DEFAULT_ROLL_HOURS = 24;
const MAX_ROLL_HOURS = 168;

/** Options for {@link createApiKeyService}. */
export interface ApiKeyServiceOptions {
  clock: Clock;
  /** Keys are issued to partners that exist. */
  partners: PartnerService;
  changes: ChangeFeed;
}

/** Issues, rolls, revokes and checks partner API keys (CONTRACT.md §2). */
export type ApiKeyService = ReturnType<typeof createApiKeyService>;

/** A new key of a partner in an environment: its secret, and the row that keeps only its digest. */
function mint(partnerId: string, environment: Environment, now: Date) {
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
}

async function loadOrThrow(em: Em, keyId: string, lock: boolean): Promise<ApiKeyRow> {
  const row = isId("key", keyId) ? await repo.find(em, keyId, lock) : null;
  if (!row) throw new ApiError("not_found", `No API key ${keyId}.`);
  return row;
}

/** Issues the first key of a partner in an environment. The secret is returned here only. */
async function issueKey(
  { clock, changes, partners }: ApiKeyServiceOptions,
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
}

/**
 * Replaces an active key. The old key keeps working until `now + expiresInHours` so the partner can deploy the
 * new one; both are valid in between (CONTRACT.md §2).
 */
async function rollKey(
  { clock, changes }: ApiKeyServiceOptions,
  em: Em,
  keyId: string,
  expiresInHours: number,
) {
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
  // This instance stops honouring the old key's unlimited life before the caller hears of the roll; the NOTIFY
  // tells the others a moment later.
  changes.emitLocal("api_key", rolled.old.id);
  return rolled;
}

/** Revokes a key at once, on every instance (the change feed drops it from every cache). */
async function revokeKey(
  { clock, changes }: ApiKeyServiceOptions,
  em: Em,
  keyId: string,
): Promise<ApiKeyRow> {
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
}

/** Creates the API key service: the keys' lifecycle here, their checking on the request path in key-authentication.ts. */
export function createApiKeyService(o: ApiKeyServiceOptions) {
  const { partners } = o;
  return {
    /** Issues the first key of a partner in an environment. The secret is returned here only. */
    issue: (em: Em, partnerId: string, environment: Environment) => issueKey(o, em, partnerId, environment),

    /**
     * Replaces an active key. The old key keeps working until `now + expiresInHours` so the partner can
     * deploy the new one; both are valid in between (CONTRACT.md §2).
     */
    roll: (em: Em, keyId: string, expiresInHours = DEFAULT_ROLL_HOURS) =>
      rollKey(o, em, keyId, expiresInHours),

    /** Revokes a key at once, on every instance (the change feed drops it from every cache). */
    revoke: (em: Em, keyId: string) => revokeKey(o, em, keyId),

    /** A key by id (never its secret), or `not_found`. */
    async get(em: Em, keyId: string): Promise<ApiKeyRow> {
      return loadOrThrow(em, keyId, false);
    },

    /** A partner's keys, newest first. */
    async list(em: Em, partnerId: string): Promise<ApiKeyRow[]> {
      await partners.get(em, partnerId);
      return repo.listForPartner(em, partnerId);
    },

    ...createKeyAuthentication(o),
  };
}
