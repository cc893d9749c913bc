import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROCESS_TEST_TIMEOUT_MS, type ServiceProcess, startServiceProcess } from "../support/process.ts";

// The process's last-resort policy (docs/operations.md), on the real entry point and its embedded PostgreSQL:
// a rejection nobody handled is logged and the process keeps serving; an exception that reached the event loop
// stops it cleanly, its PostgreSQL with it, and exits 1 for the supervisor.
let dataDir: string;
let service: ServiceProcess | undefined;
const env = (failpoints: string) => ({
  DATA_DIR: dataDir,
  DATABASE_URL: "",
  MASTER_KEY: "",
  INTERNAL_TOKEN: "",
  INTERNAL_URL: "",
  FAILPOINTS: failpoints,
});

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-last-resort-"));
  await fs.chmod(dataDir, 0o755);
});
afterAll(async () => {
  if (service && service.child.exitCode === null) {
    service.child.kill("SIGTERM");
    await service.exited;
  }
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** Waits until `cond` holds, or fails after `ms`. */
async function until(cond: () => boolean, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not so within ${ms} ms`);
}

describe("the last-resort policy", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("logs a rejection nobody handled and keeps serving", async () => {
    service = await startServiceProcess(env("healthz:reject"));
    const url = service.partnerUrl as string;
    const ids: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${url}/healthz`);
      expect(res.status).toBe(200);
      ids.push(res.headers.get("x-request-id"));
    }
    const unhandled = (l: Record<string, unknown>) => l.msg === "unhandled rejection; still serving";
    await until(() => service?.logs.filter(unhandled).length === 3);
    expect(JSON.stringify(service.logs.filter(unhandled))).toContain("failpoint healthz");
    // Each names the request whose work it was.
    expect(service.logs.filter(unhandled).map((l) => l.requestId)).toEqual(ids);
    // Still up, database and all, and still answering the API.
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect((await fetch(`${url}/partner/v1/keys`)).status).toBe(401);
    expect(service.child.exitCode).toBeNull();
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
  });

  it("stops cleanly with exit 1 on an exception that reached the event loop, leaving no PostgreSQL behind", async () => {
    service = await startServiceProcess(env("healthz:throw"));
    const url = service.partnerUrl as string;
    const res = await fetch(`${url}/healthz`).catch(() => undefined);
    expect(await service.exited).toBe(1);
    const msgs = service.logs.map((l) => l.msg);
    expect(msgs, JSON.stringify(service.logs)).toContain("uncaught exception; stopping for a restart");
    const uncaught = service.logs.find((l) => l.msg === "uncaught exception; stopping for a restart");
    expect(uncaught?.requestId).toMatch(/^req_/);
    if (res) expect(uncaught?.requestId).toBe(res.headers.get("x-request-id"));
    expect(msgs).toContain("stopped");
    // The embedded PostgreSQL was stopped with it: no server left holding the data directory.
    const pidFiles = (await fs.readdir(dataDir, { recursive: true })).filter((f) =>
      String(f).endsWith("postmaster.pid"),
    );
    expect(pidFiles).toEqual([]);
    // And the next start finds nothing orphaned.
    service = await startServiceProcess(env(""));
    expect(service.logs.map((l) => l.msg)).not.toContain(
      "stopping an orphaned embedded PostgreSQL left by an earlier run",
    );
    expect(existsSync(dataDir)).toBe(true);
  });
});
