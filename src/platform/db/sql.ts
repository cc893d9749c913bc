import { CompiledQuery } from "kysely";
import type { Em } from "./orm.ts";

/**
 * Runs SQL with real bind parameters (`$1`, `$2`, …) on the entity manager's transaction when it is in one,
 * else on the pool. MikroORM's own `execute` inlines parameters into the text; hot paths and bulk
 * statements (arrays, bytea) use this instead.
 */
export async function sql<T = Record<string, unknown>>(
  em: Em,
  text: string,
  params: readonly unknown[] = [],
): Promise<T[]> {
  const executor = em.getTransactionContext() ?? em.getConnection().getClient();
  const result = await executor.executeQuery(CompiledQuery.raw(text, params as unknown[]));
  return result.rows as T[];
}

/** Runs `fn` in a transaction: the caller's, when `em` is already in one, else a new one. */
export function inTransaction<T>(em: Em, fn: (tx: Em) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? fn(em) : em.transactional(fn);
}
