// First: the tracing SDK, when the OTEL_* variables ask for it, before anything loads what it instruments.
import "./platform/telemetry-start.ts";
import fs from "node:fs/promises";
import path from "node:path";
import { type App, createApp } from "./app.ts";
import { type Config, ConfigError, dataFiles, loadConfig } from "./config.ts";
import { MasterKeyMismatchError } from "./platform/crypto/data-keys.ts";
import { busyPort } from "./platform/http/port-check.ts";
import { requestScope } from "./platform/http/request-scope.ts";
import { createLogger, type Logger } from "./platform/logger.ts";
import { stopTracing } from "./platform/telemetry.ts";
import { passwordHashCost } from "./portal/password.ts";
import { registerService } from "./running-services.ts";
import { type Runtime, resolveRuntime } from "./runtime.ts";

/** Says whether sandbox webhooks may go to http and loopback destinations, and what decided it. */
function logLocalWebhooks(config: Readonly<Config>, logger: Logger): void {
  const because = process.env.ALLOW_LOCAL_WEBHOOKS
    ? "ALLOW_LOCAL_WEBHOOKS"
    : config.databaseUrl
      ? "the default with DATABASE_URL"
      : "the default on the embedded PostgreSQL";
  if (config.allowLocalWebhooks) {
    logger.info(
      "sandbox webhooks may go to http and loopback destinations (never this service's own ports); production ones to https on public addresses only",
      { allowLocalWebhooks: true, because },
    );
  } else {
    logger.info(
      "webhooks go to https on public addresses only (ALLOW_LOCAL_WEBHOOKS=true lets sandbox ones use http and loopback)",
      { allowLocalWebhooks: false, because },
    );
  }
}

/** The configuration, or exit 2 naming the variable; then exit 2 when a port it names is taken. */
async function configure(): Promise<Readonly<Config>> {
  let config: Readonly<Config>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const busy = await busyPort([
    ...(config.role === "worker"
      ? []
      : [{ variable: "PORT" as const, host: config.host, port: config.port }]),
    { variable: "INTERNAL_PORT", host: config.internalHost, port: config.internalPort },
  ]);
  if (busy) {
    process.stderr.write(
      `port ${busy.port} is already in use (${busy.variable}): stop what listens there, or start with ${busy.variable}=<a free port>\n`,
    );
    process.exit(2);
  }
  return config;
}

/** What only the tests set (each said loudly at start): a clock ahead, cheap password hashes, local webhooks. */
function testSettings(config: Readonly<Config>, logger: Logger) {
  // Fault tests only: this process's clock runs ahead (a worker that has reached a repayment's due date).
  const offsetMs = Number(process.env.TEST_CLOCK_OFFSET_MS ?? 0);
  if (offsetMs) logger.warn("the clock runs ahead (TEST_CLOCK_OFFSET_MS): tests only", { offsetMs });
  const clock = offsetMs ? { now: () => new Date(Date.now() + offsetMs) } : undefined;
  // Tests only: new portal passwords are hashed at a lower cost (portal/password.ts).
  if (process.env.TEST_PASSWORD_HASH_LOG_N)
    logger.warn("portal passwords are hashed at a test cost (TEST_PASSWORD_HASH_LOG_N): tests only", {
      logN: passwordHashCost().logN,
    });
  // Fault tests only: production subscriptions may use local destinations too (with ALLOW_LOCAL_WEBHOOKS), for
  // tests whose point is production delivery. Never in a deployment.
  const productionLocalWebhooks = process.env.TEST_PRODUCTION_LOCAL_WEBHOOKS === "true";
  if (productionLocalWebhooks)
    logger.warn(
      "production webhooks may go to local destinations (TEST_PRODUCTION_LOCAL_WEBHOOKS): tests only",
      { effective: config.allowLocalWebhooks },
    );
  return { clock, productionLocalWebhooks };
}

/** What the process holds and must give back on its way out. */
interface Held {
  app?: App;
  runtime: Runtime;
  unregister?: () => Promise<void>;
}

/**
 * The shutdown and the last-resort handlers (docs/operations.md), in place before anything listens: a request
 * that fails the moment the listeners open meets the policy, never Node's default (which would leave the
 * embedded PostgreSQL running behind a dead process).
 */
function onExit(config: Readonly<Config>, logger: Logger, held: Held): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("shutting down", { signal });
    const force = setTimeout(() => {
      logger.error("shutdown took too long; exiting");
      process.exit(1);
    }, 30_000);
    force.unref();
    try {
      await held.app?.stop();
      if (!config.databaseUrl) await fs.rm(serviceFileOf(config), { force: true });
      await held.unregister?.();
      await held.runtime.embedded?.stop();
      await stopTracing();
      logger.info("stopped");
      process.exit(process.exitCode ?? 0);
    } catch (err) {
      logger.error("shutdown failed", { err });
      process.exit(1);
    }
  };
  // A rejection nobody caught belongs to one request or job (every shared state change is in a database
  // transaction that did not commit): log it and keep serving. An exception that reached the event loop leaves
  // the process in a state nobody knows: stop cleanly (drain, stop the embedded PostgreSQL) and exit 1 for the
  // supervisor to restart. Both name the request whose work failed, when it was a request's (requestScope).
  process.on("unhandledRejection", (reason) =>
    logger.error("unhandled rejection; still serving", { err: reason, requestId: requestScope.getStore() }),
  );
  process.on("uncaughtException", (err) => {
    logger.error("uncaught exception; stopping for a restart", { err, requestId: requestScope.getStore() });
    process.exitCode = 1;
    void shutdown("uncaughtException");
  });
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGHUP", () => void shutdown("SIGHUP"));
}

/**
 * Lets `npm run cli` find the internal API of a service started with `npm start`: in DATA_DIR, and through the
 * registry of running services whatever DATA_DIR the CLI is run with.
 */
const serviceFileOf = (config: Readonly<Config>) => path.join(config.dataDir, dataFiles.service);

async function listForTheCli(config: Readonly<Config>, logger: Logger, app: App) {
  if (config.databaseUrl || !app.internalUrl) return undefined;
  await fs.writeFile(
    serviceFileOf(config),
    JSON.stringify({ partnerUrl: app.partnerUrl, internalUrl: app.internalUrl, pid: process.pid }),
  );
  return registerService({
    pid: process.pid,
    dataDir: config.dataDir,
    partnerUrl: app.partnerUrl,
    internalUrl: app.internalUrl,
    startedAt: new Date().toISOString(),
  }).catch((err: unknown) => {
    logger.warn("not listed among running services: run the CLI with this DATA_DIR", { err });
    return undefined;
  });
}

/** Composition root: configuration → database → app → signals. */
async function main(): Promise<void> {
  // Whatever reads the log may be gone before the service is (`npm start | tee service.log`: Ctrl-C stops tee
  // too). Lines written then are lost, not failures: unheard, each EPIPE was an uncaught exception whose own
  // log line failed again, a loop that kept the service from ever finishing its stop.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
  const config = await configure();
  const logger = createLogger({
    level: config.logLevel,
    bindings: { service: "partner-api", role: config.role },
  });
  logLocalWebhooks(config, logger);
  const runtime = await resolveRuntime(config, logger);
  const tests = testSettings(config, logger);
  const held: Held = { runtime };
  onExit(config, logger, held);
  try {
    held.app = await createApp({ config, logger, ...tests, ...runtime });
  } catch (err) {
    await runtime.embedded?.stop().catch(() => undefined);
    if (err instanceof MasterKeyMismatchError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  held.unregister = await listForTheCli(config, logger, held.app);
  // Once the CLI can find it: whoever waits for this line may use it at once.
  logger.info("started", { partner: held.app.partnerUrl, internal: held.app.internalUrl });
}

main().catch((err: unknown) => {
  process.stderr.write(`failed to start: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
