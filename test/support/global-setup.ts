import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { schema } from "../../src/entities.ts";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "../../src/platform/db/embedded.ts";
import { migrate } from "../../src/platform/db/orm.ts";
import { startBoss } from "../../src/platform/jobs/boss.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { withDatabase } from "./urls.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of a maintenance database on the test server (for CREATE/DROP DATABASE). */
    adminUrl: string;
    /** Name of the migrated template every test file's database is cloned from. */
    templateDatabase: string;
    /** Prefix of every database this run creates, so teardown can drop them. */
    databasePrefix: string;
  }
}

async function reachable(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `DATABASE_URL is set but PostgreSQL is not reachable at ${new URL(url).host}: ${(err as Error).message}. ` +
        "Unset DATABASE_URL to run the tests on the embedded PostgreSQL.",
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Starts one PostgreSQL for the whole run (the embedded one, or the server in DATABASE_URL), migrates a
 * template database once (schema, pg-boss and its queues), and lets each test file clone it.
 */
export default async function setup(project: TestProject) {
  const logger = createLogger({ level: "warn", write: (line) => process.stderr.write(`${line}\n`) });
  let embedded: EmbeddedDatabase | undefined;
  let dataDir: string | undefined;
  let adminUrl: string;
  if (process.env.DATABASE_URL) {
    await reachable(process.env.DATABASE_URL);
    adminUrl = withDatabase(process.env.DATABASE_URL, "postgres");
  } else {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-test-"));
    await fs.chmod(dataDir, 0o755);
    embedded = await startEmbeddedPostgres({ dataDir, database: "postgres", logger });
    adminUrl = embedded.adminUrl;
  }
  const prefix = `pua_t${randomBytes(3).toString("hex")}_`;
  const template = `${prefix}template`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${template}`);
  const templateUrl = withDatabase(adminUrl, template);
  await migrate(templateUrl, schema, logger);
  const boss = await startBoss({ databaseUrl: templateUrl, logger, supervise: false });
  await boss.stop({ graceful: false, close: true });

  project.provide("adminUrl", adminUrl);
  project.provide("templateDatabase", template);
  project.provide("databasePrefix", prefix);

  return async () => {
    const dbs = await admin.query<{ datname: string }>(
      "select datname from pg_database where datname like $1",
      [`${prefix}%`],
    );
    for (const { datname } of dbs.rows) {
      await admin.query(`drop database if exists ${datname} with (force)`).catch(() => undefined);
    }
    await admin.end();
    await embedded?.stop();
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  };
}
