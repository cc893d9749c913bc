import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Tenant, tenantOf } from "../platform/tenancy.ts";
import type { IdempotencyKey } from "./idempotency-key.entity.ts";

/** What a stored record answers a retry with. */
export type Stored = Pick<IdempotencyKey, "method" | "requestHash" | "response" | "expiresAt">;

/** The idempotency feature's table (idempotency_keys): the only code that reads or writes it. */
export const idempotencyRepository = {
  /** Deletes a partner's sandbox idempotency records (the sandbox reset: what they answered is gone). */
  async deleteSandbox(tx: Em, partnerId: string): Promise<number> {
    const rows = await sql(
      tx,
      "delete from idempotency_keys where partner_id = $1 and environment = 'sandbox' returning key",
      [partnerId],
    );
    return rows.length;
  },

  /**
   * Takes a transaction-scoped advisory lock on a key of `em`'s tenant without waiting: false when another
   * request with the same key holds it.
   */
  async tryLock(tx: Em, key: string): Promise<boolean> {
    const tenant: Tenant = tenantOf(tx);
    const [lock] = await sql<{ ok: boolean }>(
      tx,
      "select pg_try_advisory_xact_lock(hashtextextended($1, 0)) as ok",
      [`idempotency:${tenant.partnerId}:${tenant.environment}:${key}`],
    );
    return lock?.ok === true;
  },

  /**
   * The record of a key of `em`'s tenant, expired or not. This and {@link put} are raw: they run on every
   * idempotent write, where building the entity statements cost more CPU than the rest of the request.
   */
  async find(em: Em, key: string): Promise<Stored | undefined> {
    const tenant = tenantOf(em);
    const [row] = await sql<{ method: string; request_hash: Buffer; response: Buffer; expires_at: Date }>(
      em,
      `select method, request_hash, response, expires_at from idempotency_keys
        where partner_id = $1 and environment = $2 and key = $3`,
      [tenant.partnerId, tenant.environment, key],
    );
    return (
      row && {
        method: row.method,
        requestHash: row.request_hash,
        response: row.response,
        expiresAt: row.expires_at,
      }
    );
  },

  /** Stores (or replaces an expired) record for a key of `em`'s tenant. */
  async put(em: Em, row: Omit<IdempotencyKey, "partnerId" | "environment">): Promise<void> {
    const tenant = tenantOf(em);
    await sql(
      em,
      `insert into idempotency_keys
         (partner_id, environment, key, method, request_hash, response, created_at, expires_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8)
       on conflict (partner_id, environment, key) do update set method = excluded.method,
         request_hash = excluded.request_hash, response = excluded.response,
         created_at = excluded.created_at, expires_at = excluded.expires_at`,
      [
        tenant.partnerId,
        tenant.environment,
        row.key,
        row.method,
        row.requestHash,
        row.response,
        row.createdAt,
        row.expiresAt,
      ],
    );
  },

  /** Deletes records that expired before `now`, a batch at a time; returns how many. */
  async purgeExpired(em: Em, now: Date, batch: number): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await sql(
        em,
        `delete from idempotency_keys where ctid in (
           select ctid from idempotency_keys where expires_at < $1 limit $2) returning key`,
        [now, batch],
      );
      total += rows.length;
      if (rows.length < batch) return total;
    }
  },
};
