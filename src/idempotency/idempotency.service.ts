import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { constantTimeEqual, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import type { Environment } from "../platform/tenancy.ts";
import { idempotencyRepository as repo } from "./idempotency.repository.ts";

/** Binds a sealed stored response to its partner, environment and key. */
export const idempotencyAad = (partnerId: string, environment: string, key: string) =>
  `idempotency:${partnerId}:${environment}:${key}`;

/** CONTRACT.md §8: keys are kept 7 days. */
export const IDEMPOTENCY_TTL_MS = 7 * ms.day;

/** Who the key belongs to. */
export interface IdempotencyScope {
  partnerId: string;
  environment: Environment;
}

/** The outcome of {@link IdempotencyService.run}. */
export interface IdempotentResult {
  response: Uint8Array;
  /** True when this is the stored response of an earlier request. */
  replayed: boolean;
}

/** What {@link createIdempotencyService} returns. */
export type IdempotencyService = ReturnType<typeof createIdempotencyService>;

const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency keys (CONTRACT.md §8). A request with a key runs in one transaction that first takes a
 * non-blocking advisory lock on the key (a concurrent request with the same key gets 409
 * `idempotency_key_in_use`), then either replays the stored response (same request) or refuses (a
 * different request: 422 `idempotency_key_reused`), or runs the write and stores its response in the same
 * transaction. A failed write rolls back with its record, so a retry proceeds as if nothing started.
 */
export function createIdempotencyService({ clock, box }: { clock: Clock; box: SecretBox }) {
  // Stored responses can hold secrets (a new webhook's signing secret): they are sealed at rest.
  const aad = (scope: IdempotencyScope, key: string) =>
    idempotencyAad(scope.partnerId, scope.environment, key);
  return {
    /** Deletes a partner's sandbox idempotency records (the sandbox reset), in the caller's transaction. */
    deleteSandbox(tx: Em, partnerId: string): Promise<number> {
      return repo.deleteSandbox(tx, partnerId);
    },

    /** Checks a key's form: 1 to 255 visible ASCII characters. */
    validateKey(key: string): void {
      if (!KEY_SHAPE.test(key)) {
        throw new ApiError("invalid_request", "Idempotency-Key must be 1 to 255 visible ASCII characters.");
      }
    },

    /**
     * True when a live record holds this key for `em`'s tenant: a retry that `run` will answer from it (or
     * refuse as a reuse). Read outside any transaction, so a request can skip work that a replay does not need.
     */
    async answered(em: Em, key: string): Promise<boolean> {
      const prior = await repo.find(em, key);
      return prior !== undefined && prior.expiresAt > clock.now();
    },

    /** Runs `write` in a transaction on `em` (the request's unit of work) that also stores its response. */
    async run(
      em: Em,
      scope: IdempotencyScope,
      key: string,
      method: string,
      request: Uint8Array,
      write: (tx: Em) => Promise<Uint8Array>,
    ): Promise<IdempotentResult> {
      this.validateKey(key);
      const fingerprint = sha256(`${method}\n${Buffer.from(request).toString("base64")}`);
      return em.transactional(async (tx) => {
        if (!(await repo.tryLock(tx, key))) throw new ApiError("idempotency_key_in_use");
        const now = clock.now();
        const prior = await repo.find(tx, key);
        if (prior && prior.expiresAt > now) {
          if (prior.method !== method || !constantTimeEqual(prior.requestHash, fingerprint)) {
            throw new ApiError("idempotency_key_reused", undefined, { details: { idempotencyKey: key } });
          }
          return { response: box.open(prior.response, aad(scope, key)), replayed: true };
        }
        const response = await write(tx);
        await repo.put(tx, {
          key,
          method,
          requestHash: fingerprint,
          response: box.seal(response, aad(scope, key)),
          createdAt: now,
          expiresAt: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
        });
        return { response, replayed: false };
      });
    },

    /** Deletes records past their 7 days, a batch at a time so no statement holds many rows. */
    async purgeExpired(em: Em, batch = 1_000): Promise<number> {
      return repo.purgeExpired(em, clock.now(), batch);
    },
  };
}
