import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/platform/db/embedded.ts";
import { root } from "../support/process.ts";
import { eventually } from "../support/wait.ts";

// `npm start` as a developer or a supervisor runs it, stopped the three ways they stop it: a supervisor's
// SIGTERM to the process it started (npm) or to the service itself (node), and Ctrl-C, which signals the
// whole foreground process group. Each time the service drains and stops its embedded PostgreSQL: nothing of
// the process tree is left behind, the ports are free for the next start, and the log holds no error line
// (a clean stop must not read like a crash).

let dataDir: string;
let run: Run | undefined;

interface Run {
  npm: ChildProcess;
  port: number;
  internalPort: number;
  lines: string[];
  stderr: () => string;
  /** Resolves with npm's exit code (or signal name). */
  exited: Promise<number | string>;
  /** Resolves when npm's output has closed: no process holds it any more. */
  closed: Promise<void>;
  /** Every process of the tree seen while it served, by pid, with its start time (against pid reuse). */
  tree: Map<number, string>;
}

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-stop-"));
  await fs.chmod(dataDir, 0o755);
});
afterEach(async () => {
  // Whatever a failed run left (an orphaned service or PostgreSQL) must not hold the data directory or the
  // machine for the next run.
  if (!run) return;
  for (const [pid, started] of run.tree) if (startTime(pid) === started) signal(pid, "SIGKILL");
  run = undefined;
});
afterAll(async () => {
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** The start time of a process (field 22 of /proc/<pid>/stat), undefined once it is gone. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[2] === "Z" ? undefined : fields[19];
  } catch {
    return undefined;
  }
}

/** `pid` and every process below it. */
function descendants(pid: number): Map<number, string> {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const found = new Map<number, string>();
  const visit = (p: number) => {
    const started = startTime(p);
    if (started === undefined) return;
    found.set(p, started);
    for (const child of children.get(p) ?? []) visit(child);
  };
  visit(pid);
  return found;
}

function command(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return "";
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Whether a new listener can bind `port` on loopback. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/**
 * `npm start` in its own process group (as a terminal's foreground job is), serving on fresh ports; `piped`,
 * as `npm start | cat` (a terminal's `npm start | tee service.log`).
 */
async function npmStart({ piped = false } = {}): Promise<Run> {
  const port = await freePort();
  const internalPort = await freePort();
  const [file, args] = piped ? ["sh", ["-c", "npm start 2>&1 | cat"]] : ["npm", ["start"]];
  const npm = spawn(file, args, {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      MASTER_KEY: "",
      INTERNAL_TOKEN: "",
      HOST: "127.0.0.1",
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      LOG_LEVEL: "info",
    },
  });
  const lines: string[] = [];
  let stderr = "";
  npm.stderr?.on("data", (d) => {
    stderr += String(d);
  });
  createInterface({ input: npm.stdout as NodeJS.ReadableStream }).on("line", (line) => lines.push(line));
  const exited = new Promise<number | string>((resolve) =>
    npm.on("exit", (code, sig) => resolve(code ?? sig ?? -1)),
  );
  const closed = new Promise<void>((resolve) => npm.on("close", () => resolve()));
  const pid = npm.pid ?? 0;
  run = { npm, port, internalPort, lines, stderr: () => stderr, exited, closed, tree: new Map([[pid, "?"]]) };
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  await eventually(() => gone || lines.some((l) => l.includes('"msg":"started"')), {
    timeoutMs: 90_000,
    what: "the service to start",
  });
  if (gone) throw new Error(`npm start exited before serving:\n${lines.join("\n")}\n${stderr}`);
  const health = await fetch(`http://127.0.0.1:${port}/healthz`);
  expect(health.status).toBe(200);
  await health.arrayBuffer();
  run.tree = descendants(pid);
  return run;
}

/** The node process running the service, under npm. */
function serviceNode(r: Run): number {
  const pid = [...r.tree.keys()].find(
    (p) => command(p).includes("src/main.ts") && !command(p).includes("sh -c"),
  );
  if (!pid) throw new Error(`no service process under npm: ${[...r.tree.keys()].map(command).join("; ")}`);
  return pid;
}

/** `outputLost`: whatever read its output was stopped with it, so the end of its log is nowhere to be read. */
async function expectCleanStop(r: Run, { outputLost = false } = {}): Promise<void> {
  const code = await Promise.race([
    r.exited,
    new Promise<string>((resolve) => setTimeout(() => resolve("still running after 45 s"), 45_000)),
  ]);
  // Its output ends when the last process holding it (npm, the service) is gone; an orphan keeps it open.
  await Promise.race([r.closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  if (outputLost) expect.soft(code, r.stderr()).not.toBe("still running after 45 s");
  else expect.soft(code, r.stderr()).toBe(0);
  // Nothing of the tree outlives it: not the service, not its PostgreSQL.
  const running = () =>
    [...r.tree]
      .filter(([pid, started]) => startTime(pid) === started)
      .map(([pid]) => `${pid} ${command(pid)}`);
  const left = await eventually(() => (running().length === 0 ? [] : false), {
    timeoutMs: 10_000,
    what: "every process of the tree to be gone",
  }).catch(running);
  expect.soft(left, "processes left running").toEqual([]);
  expect.soft(r.tree.size, "the tree held the service and its PostgreSQL").toBeGreaterThanOrEqual(3);
  // The ports are free for the next start.
  expect.soft(await bindable(r.port), "PORT is free").toBe(true);
  expect.soft(await bindable(r.internalPort), "INTERNAL_PORT is free").toBe(true);
  if (outputLost) return;
  // A clean stop, logged as one.
  const entries = r.lines.flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
  // With the error each carries, so a failure here says what went wrong, not only that something did.
  const errors = entries
    .filter((e) => e.level === "error")
    .map((e) => (e.err === undefined ? `${e.msg}` : `${e.msg}: ${JSON.stringify(e.err)}`));
  expect.soft(errors, "error-level log lines").toEqual([]);
  expect.soft(entries.map((e) => e.msg)).toContain("stopped");
  expect.soft(r.stderr()).not.toMatch(/\bat \S+:\d+:\d+/); // no stack trace
}

describe("npm start stops cleanly", () => {
  it("on SIGTERM to the npm process (a supervisor that started npm)", async () => {
    const r = await npmStart();
    process.kill(r.npm.pid ?? 0, "SIGTERM");
    await expectCleanStop(r);
  }, 150_000);

  it("on SIGTERM to the node process (a supervisor that signals the service)", async () => {
    const r = await npmStart();
    process.kill(serviceNode(r), "SIGTERM");
    await expectCleanStop(r);
  }, 150_000);

  it("on Ctrl-C (SIGINT to the whole process group)", async () => {
    const r = await npmStart();
    process.kill(-(r.npm.pid ?? 0), "SIGINT");
    await expectCleanStop(r);
  }, 150_000);

  it("on Ctrl-C with its output piped (`npm start | tee service.log`), which stops the reader too", async () => {
    const r = await npmStart({ piped: true });
    // The reader (tee, here cat) is the quickest to die: the service writes its stop lines to a closed pipe.
    const reader = [...r.tree.keys()].find((pid) => command(pid) === "cat");
    if (!reader) throw new Error("no reader in the pipeline");
    signal(reader, "SIGINT");
    await eventually(() => startTime(reader) === undefined, { what: "the reader to be gone" });
    process.kill(-(r.npm.pid ?? 0), "SIGINT");
    await expectCleanStop(r, { outputLost: true });
  }, 150_000);
});
