import { Migrator } from "@mikro-orm/migrations";
import { type EntityManager, MikroORM } from "@mikro-orm/postgresql";
import pg from "pg";
import { ApiKeyEntity } from "../../apikeys/api-key.entity.ts";
import { PartnerEntity } from "../../partners/partner.entity.ts";
import { SigningKeyEntity } from "../../signing/signing-key.entity.ts";
import type { Logger } from "../logger.ts";
import { migrations } from "./migrations/index.ts";

/** Every entity of the service. */
export const entities = [PartnerEntity, ApiKeyEntity, SigningKeyEntity];

/** The ORM type the service uses. */
export type Orm = MikroORM;
/** The entity manager type the service uses; fork one per request and per job. */
export type Em = EntityManager;

/** Options for {@link createOrm}. */
export interface OrmOptions {
  databaseUrl: string;
  poolSize: number;
  logger: Logger;
}

/** Connects the ORM. No global context: every unit of work forks its own EntityManager. */
export async function createOrm(options: OrmOptions): Promise<Orm> {
  return MikroORM.init({
    clientUrl: options.databaseUrl,
    entities,
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
    pool: { min: 0, max: options.poolSize },
    allowGlobalContext: false,
    ensureDatabase: false,
    debug: false,
    logger: (message) => options.logger.debug("orm", { message }),
  });
}

/** Arbitrary but fixed: the advisory lock every instance takes before migrating. */
const MIGRATION_LOCK = 7_104_223_301;

/**
 * Applies pending migrations under a PostgreSQL advisory lock, so replicas starting together migrate once
 * (MikroORM's migrator takes no lock of its own). Returns the names of the migrations applied.
 */
export async function migrate(orm: Orm, databaseUrl: string): Promise<string[]> {
  const lock = new pg.Client({ connectionString: databaseUrl, application_name: "partner-api migrate" });
  await lock.connect();
  try {
    await lock.query("select pg_advisory_lock($1)", [MIGRATION_LOCK]);
    const applied = await orm.migrator.up();
    return applied.map((m) => m.name);
  } finally {
    await lock.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK]).catch(() => undefined);
    await lock.end();
  }
}
