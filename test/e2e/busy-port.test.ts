import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROCESS_TEST_TIMEOUT_MS, runScript } from "../support/process.ts";

// A newcomer whose port 8080 is taken gets one line that names the variable to change, at once, before the
// embedded PostgreSQL is set up or anything migrated: not a stack trace after a minute of first-start work.

let dataDir: string;
let holder: net.Server;
let port: number;
beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-busy-"));
  holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  port = (holder.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => holder.close(resolve));
  await fs.rm(dataDir, { recursive: true, force: true });
});

const start = (env: Record<string, string>) =>
  runScript("src/main.ts", [], {
    DATA_DIR: dataDir,
    DATABASE_URL: "",
    MASTER_KEY: "",
    INTERNAL_TOKEN: "",
    HOST: "127.0.0.1",
    ...env,
  });

describe("a busy port", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("is one line naming PORT or INTERNAL_PORT, exit 2, before any first-start work", async () => {
    for (const [variable, env] of [
      ["PORT", { PORT: String(port), INTERNAL_PORT: "0" }],
      ["INTERNAL_PORT", { PORT: "0", INTERNAL_PORT: String(port) }],
    ] as const) {
      // "At once" on this machine, however busy: about as soon as a start refused for its configuration, which
      // ends before anything is opened (on an idle machine, a second or two either way).
      const before = Date.now();
      const refused = await start({ ...env, PORT: "not-a-port" });
      expect(refused.stderr).toContain("configuration error: PORT");
      const baseline = Date.now() - before;
      const started = Date.now();
      const out = await start(env);
      expect(out.code, out.stderr).toBe(2);
      expect(out.stderr.trim().split("\n"), out.stderr).toHaveLength(1);
      expect(out.stderr).toContain(`port ${port} is already in use (${variable})`);
      expect(out.stderr).not.toMatch(/\bat \S+:\d+:\d+/); // no stack trace
      expect(Date.now() - started, `a refused configuration took ${baseline} ms`).toBeLessThan(
        2 * baseline + 2_000,
      );
    }
    // Nothing was set up in the data directory: no embedded database, no secrets.
    expect(await fs.readdir(dataDir)).toEqual([]);
  });
});
