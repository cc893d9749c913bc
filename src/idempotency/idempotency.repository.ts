import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Tenant, tenantOf } from "../platform/tenancy.ts";
import { type IdempotencyKey, IdempotencyKeyEntity } from "./idempotency-key.entity.ts";

/** The idempotency feature's table (idempotency_keys): the only code that reads or writes it. */
export const idempotencyRepository = {
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

  /** The record of a key of `em`'s tenant, expired or not. */
  find(em: Em, key: string): Promise<IdempotencyKey | null> {
    return em.findOne(IdempotencyKeyEntity, { key });
  },

  /** Stores (or replaces an expired) record for a key of `em`'s tenant. */
  async put(em: Em, row: Omit<IdempotencyKey, "partnerId" | "environment">): Promise<void> {
    const tenant = tenantOf(em);
    await em.upsert(IdempotencyKeyEntity, {
      ...row,
      partnerId: tenant.partnerId,
      environment: tenant.environment,
    });
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
