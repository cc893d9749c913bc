import { CompiledQuery } from "kysely";
import type { Em } from "./orm.ts";

const TIMESTAMP = /^(\d{4,}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?)([+-]\d{2})(?::?(\d{2}))?$/;

/** A PostgreSQL `timestamptz` text as a Date. */
function parseTimestamp(text: string): Date | string {
  const m = TIMESTAMP.exec(text);
  return m ? new Date(`${m[1]}T${m[2]}${m[3]}:${m[4] ?? "00"}`) : text;
}

/**
 * Runs SQL with real bind parameters (`$1`, `$2`, …) on the entity manager's transaction when it is in one,
 * else on the pool. MikroORM's own `execute` inlines parameters into the text; hot paths and bulk
 * statements (arrays, bytea) use this instead.
 *
 * The pool is MikroORM's, which leaves `timestamptz` as text: by the schema's naming convention every
 * timestamp column ends in `_at` (or is selected `as …_at`), and those come back as Dates.
 */
export async function sql<T = Record<string, unknown>>(
  em: Em,
  text: string,
  params: readonly unknown[] = [],
): Promise<T[]> {
  const executor = em.getTransactionContext() ?? em.getConnection().getClient();
  const result = await executor.executeQuery(CompiledQuery.raw(text, params as unknown[]));
  const rows = result.rows as Record<string, unknown>[];
  for (const row of rows) {
    for (const key in row) {
      const v = row[key];
      if (typeof v === "string" && key.endsWith("_at")) row[key] = parseTimestamp(v);
    }
  }
  return rows as T[];
}

/** Runs `fn` in a transaction: the caller's, when `em` is already in one, else a new one. */
export function inTransaction<T>(em: Em, fn: (tx: Em) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? fn(em) : em.transactional(fn);
}
