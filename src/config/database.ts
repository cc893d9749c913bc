import os from "node:os";
import path from "node:path";
import { type Env, int } from "./env.ts";

/** Which PostgreSQL the service uses, where the embedded default keeps its files, and the pool's limits. */
export interface DatabaseSettings {
  /** PostgreSQL URL; unset means the embedded PostgreSQL in `dataDir`. */
  databaseUrl: string | undefined;
  /** Where the embedded PostgreSQL, the development master key and the service file live. */
  dataDir: string;
  /** Database connection pool size of this process. */
  dbPoolSize: number;
  /**
   * Limits that keep the pool from ever hanging: the wait for a pooled connection (then 503 `unavailable`
   * with `Retry-After`), and PostgreSQL's `statement_timeout` and `idle_in_transaction_session_timeout`.
   */
  dbTimeouts: { acquireMs: number; statementMs: number; idleInTransactionMs: number };
}

/** Files the embedded default keeps in DATA_DIR. */
export const dataFiles = {
  masterKey: "master.key",
  internalToken: "internal-token",
  service: "service.json",
} as const;

/**
 * Database connections per process when `DB_POOL_SIZE` is unset: 10 for a server of its own (`DATABASE_URL`);
 * for the embedded PostgreSQL, which runs on this machine's cores, twice those cores plus one (HikariCP's
 * sizing for a database server's cores). Sessions beyond what the cores run at once only take turns: on 2
 * cores, a pool of 5 served about a quarter more snapshot reads a second than 16 (docs/operations.md).
 */
export function defaultPoolSize(embedded: boolean): number {
  return embedded ? 2 * os.availableParallelism() + 1 : 10;
}

/** Reads DATABASE_URL, DATA_DIR, DB_POOL_SIZE and the DB_*_TIMEOUT_MS limits. */
export function readDatabaseSettings(env: Env): DatabaseSettings {
  const databaseUrl = env.DATABASE_URL || undefined;
  return {
    databaseUrl,
    dataDir: path.resolve(env.DATA_DIR || "./.data"),
    dbPoolSize: int(env, "DB_POOL_SIZE", defaultPoolSize(!databaseUrl), 2, 200),
    dbTimeouts: {
      acquireMs: int(env, "DB_ACQUIRE_TIMEOUT_MS", 3_000, 50, 60_000),
      statementMs: int(env, "DB_STATEMENT_TIMEOUT_MS", 30_000, 100, 3_600_000),
      idleInTransactionMs: int(env, "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", 10_000, 1_000, 3_600_000),
    },
  };
}
