import os from "node:os";
import path from "node:path";
import { ConfigError, type Env, int } from "./env.ts";

/** Which PostgreSQL the service uses, where the embedded default keeps its files, and the pool's limits. */
export interface DatabaseSettings {
  /** PostgreSQL URL; unset means the embedded PostgreSQL in `dataDir`. */
  databaseUrl: string | undefined;
  /** Where the embedded PostgreSQL, the development master key and the service file live. */
  dataDir: string;
  /**
   * A session-capable connection to the primary (`DATABASE_DIRECT_URL`), for what needs a session: `LISTEN`,
   * pg-boss, the migration lock. Set when `databaseUrl` is a pooler in transaction mode (PgBouncer); its
   * presence is what tells the service that `databaseUrl` and the replicas' URLs are pooled (docs/operations.md
   * "Past one database server").
   */
  directUrl: string | undefined;
  /** Streaming replicas for reads (`DATABASE_REPLICA_URLS`, comma-separated); none by default. */
  replicaUrls: string[];
  /** A replica further behind the primary than this is left out until it catches up (`REPLICA_MAX_LAG_MS`). */
  replicaMaxLagMs: number;
  /**
   * How long a read waits for a replica to replay what the primary had committed when the read began before it
   * runs on the primary instead (`REPLICA_READ_WAIT_MS`).
   */
  replicaReadWaitMs: number;
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

/** A postgres URL, or a configuration error naming the variable. */
function postgresUrl(name: string, value: string): string {
  const url = URL.parse(value);
  if (!url || !/^postgres(ql)?:$/.test(url.protocol) || !url.hostname) {
    throw new ConfigError(`${name} must be postgresql:// URLs, got "${value.replace(/:[^:@/]*@/, ":***@")}"`);
  }
  return value;
}

/**
 * Reads DATABASE_URL, DATABASE_DIRECT_URL, DATABASE_REPLICA_URLS, REPLICA_MAX_LAG_MS, REPLICA_READ_WAIT_MS,
 * DATA_DIR, DB_POOL_SIZE and the DB_*_TIMEOUT_MS limits. A direct URL or replicas need DATABASE_URL: the
 * embedded PostgreSQL is one server on this machine.
 */
export function readDatabaseSettings(env: Env): DatabaseSettings {
  const databaseUrl = env.DATABASE_URL || undefined;
  const directUrl = env.DATABASE_DIRECT_URL
    ? postgresUrl("DATABASE_DIRECT_URL", env.DATABASE_DIRECT_URL)
    : undefined;
  const replicaUrls = (env.DATABASE_REPLICA_URLS ?? "")
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean)
    .map((u) => postgresUrl("DATABASE_REPLICA_URLS", u));
  if (!databaseUrl && (directUrl || replicaUrls.length)) {
    throw new ConfigError(
      "DATABASE_DIRECT_URL and DATABASE_REPLICA_URLS need DATABASE_URL (the primary, or its pooler)",
    );
  }
  return {
    databaseUrl,
    directUrl,
    replicaUrls,
    replicaMaxLagMs: int(env, "REPLICA_MAX_LAG_MS", 1_000, 10, 3_600_000),
    replicaReadWaitMs: int(env, "REPLICA_READ_WAIT_MS", 50, 0, 10_000),
    dataDir: path.resolve(env.DATA_DIR || "./.data"),
    dbPoolSize: int(env, "DB_POOL_SIZE", defaultPoolSize(!databaseUrl), 2, 200),
    dbTimeouts: {
      acquireMs: int(env, "DB_ACQUIRE_TIMEOUT_MS", 3_000, 50, 60_000),
      statementMs: int(env, "DB_STATEMENT_TIMEOUT_MS", 30_000, 100, 3_600_000),
      idleInTransactionMs: int(env, "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", 10_000, 1_000, 3_600_000),
    },
  };
}
