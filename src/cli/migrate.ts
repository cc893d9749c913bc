// `npm run db:migrate`: applies pending migrations (and pg-boss's schema) and exits. The service also
// migrates at start, under the same advisory lock, so this is for deployments that migrate as a step.
import { ConfigError, loadConfig } from "../config.ts";
import { schema } from "../entities.ts";
import { migrate } from "../platform/db/orm.ts";
import { startBoss } from "../platform/jobs/boss.ts";
import { createLogger } from "../platform/logger.ts";
import { resolveRuntime } from "../runtime.ts";

try {
  const config = loadConfig();
  const logger = createLogger({
    level: config.logLevel,
    bindings: { service: "partner-api", task: "migrate" },
  });
  const runtime = await resolveRuntime(config, logger);
  try {
    const applied = await migrate(runtime.directUrl, schema, logger);
    logger.info(applied.length ? "applied migrations" : "no pending migrations", { migrations: applied });
    const boss = await startBoss({ databaseUrl: runtime.directUrl, logger, supervise: false });
    await boss.stop({ graceful: false, close: true });
  } finally {
    await runtime.embedded?.stop();
  }
} catch (err) {
  process.stderr.write(
    `${err instanceof ConfigError ? "configuration error" : "migration failed"}: ${(err as Error).message}\n`,
  );
  process.exitCode = 1;
}
