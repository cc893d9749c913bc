import { createHash } from "node:crypto";
import { CompiledQuery } from "kysely";
import type pg from "pg";
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
  options: SqlOptions = {},
): Promise<T[]> {
  const tx = em.getTransactionContext();
  let rows: Record<string, unknown>[];
  if (options.prepare && !tx && !unnamedOnly.has(em.getConnection())) {
    const pool = await nativePool(em);
    const result = await pool.query({ name: statementName(text), text, values: params as unknown[] });
    rows = result.rows;
  } else {
    const executor = tx ?? em.getConnection().getClient();
    const result = await executor.executeQuery(CompiledQuery.raw(text, params as unknown[]));
    rows = result.rows as Record<string, unknown>[];
  }
  for (const row of rows) {
    for (const key in row) {
      const v = row[key];
      if (typeof v === "string" && key.endsWith("_at")) row[key] = parseTimestamp(v);
    }
  }
  return rows as T[];
}

/** Options for {@link sql}. */
export interface SqlOptions {
  /**
   * Runs the statement as a named prepared statement on each pooled connection (outside a transaction;
   * inside one it runs as usual). PostgreSQL then parses it once per connection and, after five runs,
   * keeps a generic plan when that costs no more than planning each time: for a hot read with many
   * sub-queries, planning costs several times what executing does. Only for statements run very often
   * whose plan does not depend on the parameters' values.
   */
  prepare?: boolean;
}

/** Connections behind a pooler in transaction mode, where a named statement may be missing or already exist. */
const unnamedOnly = new WeakSet<object>();

/**
 * Makes {@link SqlOptions.prepare} a no-op on `em`'s connections: behind PgBouncer in transaction mode, a
 * statement prepared on one server session is unknown on the next (or already exists there: `prepared
 * statement "q…" already exists`).
 */
export function withoutNamedStatements(em: Em): void {
  unnamedOnly.add(em.getConnection());
}

/** False behind a pooler in transaction mode ({@link withoutNamedStatements}): `prepare` is then a no-op. */
export function namedStatements(em: Em): boolean {
  return !unnamedOnly.has(em.getConnection());
}

const names = new Map<string, string>();
/** A statement's name on the server, derived from its text, so two texts never share one. */
function statementName(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `q${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

const pools = new WeakMap<object, Promise<pg.Pool>>();
/** The `pg` pool under MikroORM's connection (the same connections, not another pool). */
function nativePool(em: Em): Promise<pg.Pool> {
  const connection = em.getConnection();
  let pool = pools.get(connection);
  if (!pool) {
    pool = connection.getNativeClient() as Promise<pg.Pool>;
    pools.set(connection, pool);
    // A failure (the database unreachable at the first call) is not remembered: the next call tries again.
    pool.catch(() => pools.delete(connection));
  }
  return pool;
}

/** Runs `fn` in a transaction: the caller's, when `em` is already in one, else a new one. */
export function inTransaction<T>(em: Em, fn: (tx: Em) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? fn(em) : em.transactional(fn);
}
