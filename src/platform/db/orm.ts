import type { TransactionOptions } from "@mikro-orm/core";
import { Migrator } from "@mikro-orm/migrations";
import { EntityManager, MikroORM, type Options } from "@mikro-orm/postgresql";
import pg from "pg";
import type { Logger } from "../logger.ts";
import { whileHolding } from "../network-guard.ts";
import { migrations } from "./migrations/index.ts";
import { trackPool } from "./pool-stats.ts";
import { withoutNamedStatements } from "./sql.ts";

/** The ORM type the service uses. */
export type Orm = MikroORM;
/** The entity manager type the service uses; fork one per request and per job. */
export type Em = EntityManager;

/**
 * A unit of work made on first use: a request that never reaches the database (a cached key, a cached
 * document) never forks one.
 */
export type LazyEm = () => Em;

/**
 * Runs one read-only statement where it may be served: a streaming replica, given the primary's WAL position it
 * must have applied (`after`; null on the primary), whose statement checks so itself and throws `ReplicaBehind`
 * when it has not (platform/db/replicas.ts). The entity manager it gives is only for reading.
 */
export type Reader = <T>(fn: (em: Em, after: string | null) => Promise<T>) => Promise<T>;

/** Limits that keep one slow or stuck unit of work from holding the pool (ARCHITECTURE.md "Data"). */
export interface DbTimeouts {
  /** How long a unit of work waits for a pooled connection before it fails (503 `unavailable`). */
  acquireMs: number;
  /** PostgreSQL `statement_timeout` of every pooled session. */
  statementMs: number;
  /** PostgreSQL `idle_in_transaction_session_timeout`: a transaction left waiting this long is killed. */
  idleInTransactionMs: number;
}

/**
 * The entities and stored routines the ORM maps: the features' own, listed by the composition root
 * (`src/entities.ts`), so the platform names no feature.
 */
export interface Schema {
  entities: NonNullable<Options["entities"]>;
  routines: NonNullable<Options["routines"]>;
}

/** Options for {@link createOrm}. */
export interface OrmOptions {
  databaseUrl: string;
  schema: Schema;
  poolSize: number;
  logger: Logger;
  /** Unset: no limits (migrations and operators' tools, whose statements may rightly run long). */
  timeouts?: DbTimeouts;
  /**
   * `databaseUrl` is a pooler in transaction mode (PgBouncer): each transaction, or each statement outside one,
   * may run on another server session. Nothing is asked of the session: no startup parameters beyond the
   * application's name (PgBouncer refuses others; the time-outs are then the database role's, see
   * docs/operations.md), no named prepared statements ({@link sql}).
   */
  pooled?: boolean;
  /** What the connections are called in `pg_stat_activity`. */
  applicationName?: string;
  /** The pool's name in the `db_pool_*` gauges, when not its `applicationName` (each replica's is its own). */
  poolLabel?: string;
}

/**
 * The service's entity manager: every transaction's callback runs as work that holds a connection, so an
 * outbound call started inside one is caught (platform/network-guard.ts). Nested transactions (savepoints)
 * are inside the outer one's context already.
 */
class GuardedEntityManager extends EntityManager {
  override transactional<T>(cb: (em: this) => T | Promise<T>, options?: TransactionOptions): Promise<T> {
    return super.transactional((em) => whileHolding("transaction", () => cb(em)), options);
  }
}

/** Connects the ORM. No global context: every unit of work forks its own EntityManager. */
export async function createOrm(options: OrmOptions): Promise<Orm> {
  const { timeouts, logger, pooled = false } = options;
  const orm = await MikroORM.init({
    clientUrl: options.databaseUrl,
    entityManager: GuardedEntityManager,
    entities: options.schema.entities,
    routines: options.schema.routines,
    extensions: [Migrator],
    // The migrations block is merged field by field; a missing migrationsList would silently migrate nothing.
    migrations: {
      migrationsList: migrations,
      tableName: "schema_migrations",
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      silent: true,
    },
    // A fixed-size pool: a connection once opened is kept, not closed after 10 idle seconds. A new PostgreSQL
    // session costs a fork and cold caches, and the snapshot read's prepared statement is planned afresh on it
    // (five custom plans before the generic one): under a rise in load after a quiet spell, that showed as
    // 100-500 ms reads. PostgreSQL holds an idle session for a few MB.
    pool: { min: options.poolSize, max: options.poolSize },
    // Passed to `pg.Pool`: `connectionTimeoutMillis` also bounds the wait for a free pooled connection. It is the
    // client's own deadline, so it holds behind a pooler too; the two time-outs are startup parameters, which
    // PgBouncer refuses.
    driverOptions: {
      application_name: options.applicationName ?? "partner-api",
      ...(timeouts && { connectionTimeoutMillis: timeouts.acquireMs }),
      ...(timeouts &&
        !pooled && {
          statement_timeout: timeouts.statementMs,
          idle_in_transaction_session_timeout: timeouts.idleInTransactionMs,
        }),
      onPoolCreated: (pool: pg.Pool) => {
        trackPool(pool, options.poolLabel ?? options.applicationName ?? "partner-api");
        pool.on("connect", (client) => {
          // PostgreSQL ends a session whose transaction sat idle too long (a unit of work stuck on something
          // other than the database): say so loudly, the pool replaces the connection by itself.
          client.on("error", (err: Error & { code?: string }) => {
            if (err.code === "25P03") logger.error("killed a transaction left idle too long", { err });
            else logger.warn("database connection lost", { err: err.message, code: err.code });
          });
          if (timeouts) watchQueries(client, timeouts.statementMs + QUERY_GRACE_MS, logger);
        });
      },
    },
    allowGlobalContext: false,
    // Filters (the tenant filter) apply to the entity queried, never through its relations: by default MikroORM
    // joins every many-to-one whose target has a filter, to filter the target too, and a page of deliveries
    // joined events, webhooks and the deliveries they replay before its `limit` (31 ms for 50 rows with 180,000
    // deliveries, 1.9 s at p99 in bench:scale). A relation never crosses tenants, so the join adds nothing.
    filtersOnRelations: false,
    autoJoinRefsForFilters: false,
    // No relation here has an inverse side to keep in sync, and changes are found at flush by comparing with
    // what was loaded. Left on, every entity loaded defines each of its properties anew on itself (an accessor
    // per property per row): 13 % of the service's time serving pages of 100 disbursements.
    propagationOnPrototype: false,
    ensureDatabase: false,
    debug: false,
    logger: (message) => logger.debug("orm", { message }),
  });
  if (pooled) withoutNamedStatements(orm.em);
  return orm;
}

/**
 * Behind a pooler the service cannot set `statement_timeout` and `idle_in_transaction_session_timeout` when it
 * connects (PgBouncer refuses the startup parameters): the sessions have the database role's settings. Says so
 * loudly when those are off, with the statement that sets them (docs/operations.md "Past one database server").
 */
export async function checkPooledTimeouts(orm: Orm, timeouts: DbTimeouts, logger: Logger): Promise<void> {
  const rows = await orm.em
    .fork()
    .getConnection()
    .execute<{ statement: string; idle: string; role: string; db: string }[]>(
      `select current_setting('statement_timeout') as statement,
              current_setting('idle_in_transaction_session_timeout') as idle, current_user as role, current_database() as db`,
    );
  const row = rows[0];
  if (row && (row.statement === "0" || row.idle === "0")) {
    logger.warn(
      "the pooled database sessions have no statement or idle-in-transaction time-out: set them on the role",
      {
        statement_timeout: row.statement,
        idle_in_transaction_session_timeout: row.idle,
        fix:
          `alter role "${row.role}" in database "${row.db}" set statement_timeout = '${timeouts.statementMs}ms'; ` +
          `alter role "${row.role}" in database "${row.db}" set idle_in_transaction_session_timeout = '${timeouts.idleInTransactionMs}ms'`,
      },
    );
  }
}

/** How long past the server's statement time-out a query may go unanswered before its connection is dropped. */
const QUERY_GRACE_MS = 2_000;

/**
 * Drops a connection whose query goes unanswered past `limitMs`. PostgreSQL cancels a statement at its own
 * time-out, so silence past it means the network or the server is gone (a half-open connection stays silent
 * for as long as TCP lets it): the query fails, the pool discards the connection when it comes back and
 * opens a new one, and no request or job waits on it for ever. `pg`'s own `query_timeout` rejects the query
 * but keeps the dead connection in the pool, so this one is hand-written; it costs a timer per query.
 */
function watchQueries(client: pg.PoolClient, limitMs: number, logger: Logger): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const first = args[0] as { submit?: unknown } | string | undefined;
    const result = query(...args);
    // Cursors and callback-style calls are left as they are: the service runs queries as promises.
    if (typeof first === "object" && typeof first?.submit === "function") return result;
    if (!(result instanceof Promise)) return result;
    const timer = setTimeout(() => {
      logger.error("dropped a database connection that stopped answering", { afterMs: limitMs });
      // pg keeps the socket on an untyped `connection` (library interop).
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    }, limitMs);
    timer.unref();
    return result.finally(() => clearTimeout(timer));
  };
}

/** Arbitrary but fixed: the advisory lock every instance takes before migrating. */
const MIGRATION_LOCK = 7_104_223_301;

/**
 * Applies pending migrations under a PostgreSQL advisory lock, so instances starting together migrate once
 * (MikroORM's migrator takes no lock of its own). The lock is a session's: `databaseUrl` must reach the primary
 * itself, never a pooler in transaction mode (`DATABASE_DIRECT_URL`). It uses an ORM of its own, without the
 * service's statement time-out. Returns the names of the migrations applied.
 */
export async function migrate(databaseUrl: string, schema: Schema, logger: Logger): Promise<string[]> {
  const lock = new pg.Client({ connectionString: databaseUrl, application_name: "partner-api migrate" });
  await lock.connect();
  const orm = await createOrm({ databaseUrl, schema, poolSize: 1, logger });
  try {
    await lock.query("select pg_advisory_lock($1)", [MIGRATION_LOCK]);
    const applied = await orm.migrator.up();
    return applied.map((m) => m.name);
  } finally {
    await lock.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK]).catch(() => undefined);
    await lock.end();
    await orm.close();
  }
}
