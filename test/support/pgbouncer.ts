import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { freePort } from "../../src/platform/db/embedded.ts";

/** A real PgBouncer in front of a PostgreSQL server, as a pooled deployment puts one. */
export interface PgBouncer {
  /** The target URL (database, user, password) with PgBouncer's host and port in place of the server's. */
  url: string;
  port: number;
  /** URL of PgBouncer's admin console (`SHOW POOLS`, `SHOW SERVERS`...), as the target's user. */
  adminUrl: string;
  /** Stops PgBouncer (SIGINT; SIGKILL after 5 s) and removes its files. */
  stop(): Promise<void>;
}

/** Options for {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** `transaction` by default: a server connection per transaction, as the service's pooled mode expects. */
  poolMode?: "transaction" | "session";
  /** Server connections per database and user; 20 by default. */
  defaultPoolSize?: number;
  /** Client connections PgBouncer accepts; 1000 by default. */
  maxClientConn?: number;
  /** Further `[pgbouncer]` settings (`server_login_retry`, `query_wait_timeout`, ...). */
  settings?: Record<string, string | number>;
}

const CANDIDATES = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"];
const DEADLINE_MS = 10_000;

function binary(): string | undefined {
  return CANDIDATES.find((file) => existsSync(file));
}

/** Whether PgBouncer is installed (Debian's `pgbouncer` package; `.ci/run` installs it), for `describe.skipIf`. */
export function pgbouncerAvailable(): boolean {
  return binary() !== undefined;
}

/** A value in PgBouncer's auth file: double-quoted, a double quote doubled. */
function quoted(value: string): string {
  return `"${value.replaceAll('"', '""')}"`;
}

/**
 * Starts PgBouncer on a free loopback port in front of `target`, with every database of the target's server
 * reachable through it. Clients authenticate with SCRAM-SHA-256 using the target's user and password, which
 * PgBouncer keeps in plain text so it can do SCRAM to the server too. Resolves once it answers a query.
 */
export async function startPgBouncer(target: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
  const bin = binary();
  if (!bin) throw new Error(`pgbouncer is not installed (looked for ${CANDIDATES.join(", ")})`);
  const server = new URL(target);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-pgbouncer-"));
  const ini = path.join(dir, "pgbouncer.ini");
  const userlist = path.join(dir, "userlist.txt");
  await fs.writeFile(userlist, `${quoted(user)} ${quoted(password)}\n`, { mode: 0o600 });
  await fs.writeFile(
    ini,
    [
      "[databases]",
      `* = host=${server.hostname} port=${server.port || "5432"}`,
      "",
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      // No unix socket: nothing else on the machine must reach it, and another run's socket would collide.
      "unix_socket_dir =",
      "auth_type = scram-sha-256",
      `auth_file = ${userlist}`,
      `admin_users = ${user}`,
      `pool_mode = ${options.poolMode ?? "transaction"}`,
      `max_client_conn = ${options.maxClientConn ?? 1000}`,
      `default_pool_size = ${options.defaultPoolSize ?? 20}`,
      // What JDBC-style clients send; nothing else (no statement_timeout): in pooled mode the service sends none.
      "ignore_startup_parameters = extra_float_digits",
      ...Object.entries(options.settings ?? {}).map(([k, v]) => `${k} = ${v}`),
      `logfile = ${path.join(dir, "pgbouncer.log")}`,
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  // PgBouncer refuses to run as root: it runs as `postgres`, which must read its files and write its log.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const id = async (flag: string) =>
      Number((await promisify(execFile)("id", [flag, "postgres"], { encoding: "utf8" })).stdout.trim());
    const [uid, gid] = [await id("-u"), await id("-g")];
    for (const file of [dir, ini, userlist]) await fs.chown(file, uid, gid);
    await fs.chmod(dir, 0o755);
  }
  const child = spawn(bin, [...(asRoot ? ["-u", "postgres"] : []), ini], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-4_000);
  });
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const exit = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  const stop = async () => {
    if (!exited()) {
      child.kill("SIGINT");
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((r) => {
        timer = setTimeout(r, 5_000, false);
      });
      const gone = await Promise.race([exit.then(() => true), late]);
      clearTimeout(timer);
      if (!gone) {
        child.kill("SIGKILL");
        await exit;
      }
    }
    await fs.rm(dir, { recursive: true, force: true });
  };

  const url = new URL(target);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  const admin = new URL(url);
  admin.pathname = "/pgbouncer";
  try {
    await waitAccepting(url.toString(), child, () => output);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: url.toString(), port, adminUrl: admin.toString(), stop };
}

/** Polls with `select 1` until PgBouncer answers through to the server; fails if it exits or after the deadline. */
async function waitAccepting(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  let last: unknown;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`pgbouncer exited with ${child.exitCode ?? child.signalCode}: ${output()}`);
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    try {
      await client.connect();
      await client.query("select 1");
      return;
    } catch (err) {
      last = err;
    } finally {
      await client.end().catch(() => undefined);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `pgbouncer did not answer within ${DEADLINE_MS} ms: ${(last as Error)?.message}; ${output()}`,
        {
          cause: last,
        },
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
