import { type ChildProcess, execFile, spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { root } from "../support/process.ts";

// A newcomer's first hour, as the README prints it: a fresh copy of the repository in a temporary folder,
// `npm start` with nothing configured, the walk-through's block and the quickstart's command
// pasted into one shell, then the repository's own checks, which must still pass: nothing the README asks for
// lands where lint or git would see it.

const run = promisify(execFile);
let copy: string;
let service: ChildProcess;
let baseUrl: string;
const serviceLog: string[] = [];

/** Environment of a newcomer's shell: none of the variables the test run itself may have set. */
function newcomerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (
      /^(DATABASE_URL|MASTER_KEY|MASTER_KEYS_ACCEPTED|INTERNAL_TOKEN|INTERNAL_URL|DATA_DIR|ALLOW_LOCAL_WEBHOOKS|PORT|INTERNAL_PORT|BASE_URL|API_KEY|KEY|PARTNER|npm_.*)$/.test(
        name,
      )
    )
      delete env[name];
  }
  return { ...env, ...extra };
}

async function readmeBlock(from: string, to: string): Promise<string> {
  const readme = await fs.readFile(path.join(copy, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf(from), readme.indexOf(to));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`README.md has no sh block between "${from}" and "${to}"`);
  return block;
}

beforeAll(async () => {
  copy = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-first-hour-"));
  // As a clone in a home directory is: readable by others (as root, the embedded PostgreSQL runs as "postgres").
  await fs.chmod(copy, 0o755);
  // What a clone holds: the tracked files and those git would add (so uncommitted work is tried too).
  const { stdout } = await run("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
  });
  for (const file of stdout.split("\0").filter(Boolean)) {
    const from = path.join(root, file);
    if (!(await fs.stat(from).catch(() => null))?.isFile()) continue; // deleted, not yet committed
    await fs.mkdir(path.dirname(path.join(copy, file)), { recursive: true });
    await fs.copyFile(from, path.join(copy, file));
  }
  const git = (...args: string[]) => run("git", args, { cwd: copy });
  await git("init", "-q");
  await git("add", "-A");
  await git("-c", "user.name=newcomer", "-c", "user.email=newcomer@example.com", "commit", "-qm", "clone");
  // The installed packages are the repository's own: CI's run starts with `npm install` on a fresh clone, so what
  // install does is tried there on every change; here the copy shares its node_modules (the SDK resolves to
  // the repository's built package) and the built portal.
  await fs.symlink(path.join(root, "node_modules"), path.join(copy, "node_modules"), "dir");
  // (.gitignore's `node_modules/` names a folder; git sees this link as a file, so the copy's own exclude says it.)
  await fs.appendFile(path.join(copy, ".git/info/exclude"), "/node_modules\n");
  await fs.cp(path.join(root, "dist"), path.join(copy, "dist"), { recursive: true });

  // npm start, with nothing configured, in a process group of its own (as a terminal would run it).
  service = spawn("npm", ["start"], {
    cwd: copy,
    env: newcomerEnv({ PORT: "0", INTERNAL_PORT: "0" }),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  service.stderr?.on("data", (d) => serviceLog.push(String(d)));
  baseUrl = await new Promise<string>((resolve, reject) => {
    createInterface({ input: service.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      serviceLog.push(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; partner?: string };
        if (entry.msg === "started" && entry.partner) resolve(entry.partner);
      } catch {
        // npm's own banner
      }
    });
    service.once("exit", (code) => reject(new Error(`npm start exited ${code}:\n${serviceLog.join("\n")}`)));
  });
}, 360_000);

afterAll(async () => {
  let stopped = true;
  if (service && service.exitCode === null && service.signalCode === null) {
    // SIGTERM to npm, as a supervisor sends it, stops the service and its PostgreSQL.
    const closed = new Promise((resolve) => service.once("close", () => resolve(true)));
    service.kill("SIGTERM");
    stopped = (await Promise.race([closed, new Promise((r) => setTimeout(() => r(false), 30_000))])) === true;
    if (!stopped) {
      process.kill(-(service.pid ?? 0), "SIGKILL");
      // Its PostgreSQL runs in a session of its own: stop it too, so a failed run leaves nothing behind.
      const pid = Number(
        (await fs.readFile(path.join(copy, ".data/pg/postmaster.pid"), "utf8").catch(() => "")).split(
          "\n",
        )[0],
      );
      if (pid > 0) process.kill(pid, "SIGQUIT");
    }
  }
  if (copy) await fs.rm(copy, { recursive: true, force: true });
  expect(stopped, "npm start did not stop within 30 s of SIGTERM").toBe(true);
}, 60_000);

describe("the first hour, on a fresh copy of the repository", () => {
  it("runs the README's walk-through and quickstart on one npm start, and leaves lint clean and git status empty", async () => {
    const walk = await readmeBlock("## Five-minute walk-through", "## Quickstart");
    const quick = await readmeBlock("## Quickstart", "## The partner portal");
    const shell = (script: string) =>
      run("bash", ["-c", script], {
        cwd: copy,
        env: newcomerEnv({ BASE_URL: baseUrl }),
        timeout: 180_000,
        maxBuffer: 16 * 1024 * 1024,
      });

    // The walk-through, then the quickstart in the same shell.
    const first = await shell(`${walk}\n${quick}`);
    const out = first.stdout;
    const partner = /^created partner (ptn_[0-9A-Z]{26})$/m.exec(out)?.[1];
    expect(partner, out).toBeDefined();
    expect(out).toMatch(/^issued sk_sandbox_…$/m);
    // curl (REST), buf curl (gRPC) and the Connect example each show the sandbox signing key.
    expect(out.match(/"environment":\s*"sandbox"/g)?.length, out).toBeGreaterThanOrEqual(2);
    expect(out).toMatch(/^\S+ sandbox \S+$/m);
    expect(out).not.toContain("undefined");
    const steps = out
      .split("\n")
      .filter((l) => /^[1-7]\. /.test(l) && !l.startsWith("1. An operator"))
      .slice(-7);
    expect(
      steps.map((l) => l.slice(0, 2)),
      out,
    ).toEqual(["1.", "2.", "3.", "4.", "5.", "6.", "7."]);
    expect(steps[1]).toMatch(/^2\. consent granted cns_/);
    expect(steps[2]).toMatch(/^3\. verified snapshot: tier Trusted inflow \d+/);
    expect(steps[3]).toMatch(/^4\. offered dsb_\S+ to accept at http:\/\/\S+\/mandate\/[0-9A-Za-z]{32}$/);
    expect(steps[4]).toMatch(/^5\. accepted and delivered dsb_\S+ fee 75000$/); // kobo, not a bigint literal
    expect(steps[5]).toMatch(/^6\. repayment collected rpy_/);
    expect(steps[6]).toMatch(/^7\. webhook subscription removed whk_/);

    // Run again, it makes a new partner and says the same.
    const second = await shell(walk);
    const again = /^created partner (ptn_[0-9A-Z]{26})$/m.exec(second.stdout)?.[1];
    expect(again).toBeDefined();
    expect(again).not.toBe(partner);

    // The repository's own checks still pass, and nothing new is in it.
    await run("npm", ["run", "-s", "lint"], { cwd: copy, env: newcomerEnv(), timeout: 120_000 }).catch(
      (err: { stdout: string; stderr: string }) => {
        throw new Error(`lint fails after the first hour:\n${err.stdout}${err.stderr}`);
      },
    );
    const status = await run("git", ["status", "--porcelain"], { cwd: copy });
    expect(status.stdout).toBe("");
    // Nothing the service said was at error level (50+ in its JSON lines).
    const errors = serviceLog.filter((l) => /"level":\s*(5\d|6\d|"error"|"fatal")/.test(l));
    expect(errors).toEqual([]);
  }, 360_000);

  it("stops the walk-through at the first failing line rather than carry on with an empty key", async () => {
    const walk = await readmeBlock("## Five-minute walk-through", "## Quickstart");
    // The command line is pointed at an internal API that is not there: step 1 fails, and nothing after it runs.
    const failed = await run("bash", ["-c", walk], {
      cwd: copy,
      env: newcomerEnv({
        BASE_URL: baseUrl,
        INTERNAL_URL: "http://127.0.0.1:1",
        INTERNAL_TOKEN: "x".repeat(32),
      }),
      timeout: 60_000,
    }).then(
      () => undefined,
      (err: { code: number; stdout: string }) => err,
    );
    expect(failed?.code).not.toBe(0);
    expect(failed?.stdout ?? "").not.toContain("created partner");
    expect(failed?.stdout ?? "").not.toContain("issued");
  }, 120_000);
});
