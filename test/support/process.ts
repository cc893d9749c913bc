import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";

/** The repository root. */
export const root = path.resolve(import.meta.dirname, "../..");

/** A service started as its own process with `node src/main.ts`, as `npm start` does. */
export interface ServiceProcess {
  child: ChildProcess;
  /** Undefined for a worker-only process. */
  partnerUrl: string | undefined;
  internalUrl: string | undefined;
  /** Every log line so far, parsed. */
  logs: Record<string, unknown>[];
  /** Resolves with the exit code (or signal name). */
  exited: Promise<number | string>;
}

/** How long {@link startServiceProcess} waits for the service to say it started. */
export const PROCESS_START_TIMEOUT_MS = 60_000;

/**
 * The deadline of a test that starts Node processes (the service, its command line, scripts): what a start
 * costs is what the machine has to spare, so such a test has twice the start time-out, not the suite's 30 s.
 */
export const PROCESS_TEST_TIMEOUT_MS = 2 * PROCESS_START_TIMEOUT_MS;

/** Every service process this test file started, so the network tripwire can read their logs. */
export const serviceProcesses = new Set<ServiceProcess>();

/** Starts the service and waits until it logs that it started (with the addresses it listens on, if any). */
export async function startServiceProcess(
  env: Record<string, string>,
  timeoutMs = PROCESS_START_TIMEOUT_MS,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ["src/main.ts"], {
    cwd: root,
    env: { ...process.env, PORT: "0", INTERNAL_PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr += String(d);
  });
  // On "close", not "exit": "exit" can come before the last lines the process wrote have been read.
  const exited = new Promise<number | string>((resolve) =>
    child.on("close", (code, signal) => resolve(code ?? signal ?? -1)),
  );
  const listening = new Promise<{ partner?: string; internal?: string }>((resolve, reject) => {
    // A service that did not start in time is stopped before the test fails (SIGKILL if SIGTERM is not enough),
    // so it does not hold its DATA_DIR and its PostgreSQL against the file's next test.
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 30_000).unref();
    }, timeoutMs);
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      // SERVICE_LOG_DIR=<dir>: each process's log lines also go to <dir>/<pid>.log, to see what a failed run did.
      if (process.env.SERVICE_LOG_DIR)
        appendFileSync(path.join(process.env.SERVICE_LOG_DIR, `${child.pid}.log`), `${line}\n`);
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry.msg === "started") {
          clearTimeout(timer);
          resolve(entry as never);
        }
      } catch {
        // not a log line
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(
          timedOut
            ? `service did not start in ${timeoutMs} ms, and was stopped: ${stderr}`
            : `service exited with ${code} before listening: ${stderr}`,
        ),
      );
    });
  });
  const { partner, internal } = await listening;
  const service = { child, partnerUrl: partner, internalUrl: internal, logs, exited };
  serviceProcesses.add(service);
  return service;
}

/** Runs the command-line tool (in `cwd`, the repository unless said) and returns its exit code and output. */
export function runCli(
  args: string[],
  env: Record<string, string>,
  cwd = root,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return runScript("src/cli/main.ts", args, env, cwd);
}

/** Runs one of the repository's scripts (`src/cli/rekey.ts`, …) and returns its exit code and output. */
export async function runScript(
  script: string,
  args: string[],
  env: Record<string, string>,
  cwd = root,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [path.join(root, script), ...args], {
    cwd,
    env: { ...process.env, ...env },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += String(d);
  });
  child.stderr.on("data", (d) => {
    stderr += String(d);
  });
  const code = await new Promise<number>((resolve) => child.on("exit", (c) => resolve(c ?? -1)));
  return { code, stdout, stderr };
}
