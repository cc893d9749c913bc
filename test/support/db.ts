import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";
import { schema } from "../../src/entities.ts";
import { createOrm } from "../../src/platform/db/orm.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { withDatabase } from "./urls.ts";

/** A fresh database for one test file, cloned from the migrated template (about 100 ms). */
export async function createTestDatabase(): Promise<string> {
  const adminUrl = inject("adminUrl");
  const name = `${inject("databasePrefix")}${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${inject("templateDatabase")}`);
  } finally {
    await admin.end();
  }
  return withDatabase(adminUrl, name);
}

/**
 * A fresh, empty database migrated up to and including the migration `to` (not from the template, which has
 * them all): the schema as a release before a later migration left it, for testing that migration over rows.
 */
export async function createDatabaseMigratedTo(to: string): Promise<string> {
  const adminUrl = inject("adminUrl");
  const name = `${inject("databasePrefix")}${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
  const orm = await createOrm({ databaseUrl: url, schema, poolSize: 1, logger });
  try {
    await orm.migrator.up({ to });
  } finally {
    await orm.close();
  }
  return url;
}
