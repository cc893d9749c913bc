import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registryDir } from "../../src/running-services.ts";
import { runCli, type ServiceProcess, startServiceProcess } from "../support/process.ts";

// `npm run cli` finds a service started with `npm start` whatever DATA_DIR it was started with, and when none
// runs its error says which variable to set. The registry of running services lives in the temporary
// directory; this file gives the service and the CLI one of their own (TMPDIR), so services that other test
// files or people run on the machine are not seen.

let tmp: string;
let dataDir: string;
let elsewhere: string;
let service: ServiceProcess | undefined;
/** The CLI as a developer runs it from another directory, with neither DATA_DIR nor INTERNAL_URL set. */
const cli = (...args: string[]) =>
  runCli(args, { TMPDIR: tmp, DATA_DIR: "", INTERNAL_URL: "", INTERNAL_TOKEN: "" }, elsewhere);

beforeAll(async () => {
  // The embedded PostgreSQL runs as another user when the tests run as root: it must reach both.
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-tmp-"));
  await fs.chmod(tmp, 0o755);
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-custom-"));
  await fs.chmod(dataDir, 0o755);
  elsewhere = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-cwd-"));
}, 60_000);
afterAll(async () => {
  if (service && service.child.exitCode === null) {
    service.child.kill("SIGTERM");
    await service.exited;
  }
  for (const dir of [tmp, dataDir, elsewhere]) await fs.rm(dir, { recursive: true, force: true });
});

describe("the CLI finds the service", () => {
  it("with no service running, says so and names DATA_DIR and INTERNAL_URL", async () => {
    // A service that died without a word (kill -9) leaves its entry: it does not count.
    const dead = spawn(process.execPath, ["-e", ""]);
    await new Promise((resolve) => dead.on("exit", resolve));
    const dir = registryDir(tmp);
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.writeFile(
      path.join(dir, `${dead.pid}.json`),
      JSON.stringify({
        pid: dead.pid,
        dataDir,
        internalUrl: "http://127.0.0.1:1",
        startedAt: new Date().toISOString(),
      }),
    );
    const out = await cli("partner", "list");
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/no running service found/);
    expect(out.stderr).toContain("DATA_DIR");
    expect(out.stderr).toContain("INTERNAL_URL");
    expect(await fs.readdir(dir)).toEqual([]); // the stale entry is cleared

    const named = await runCli(
      ["partner", "list"],
      { TMPDIR: tmp, DATA_DIR: path.join(dataDir, "nothing-here"), INTERNAL_URL: "", INTERNAL_TOKEN: "" },
      elsewhere,
    );
    expect(named.code).toBe(1);
    expect(named.stderr).toContain(
      `no running service found in DATA_DIR ${path.join(dataDir, "nothing-here")}`,
    );
  });

  it("started with a custom DATA_DIR, from a CLI run without it; and not once it stopped", async () => {
    service = await startServiceProcess({
      TMPDIR: tmp,
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      MASTER_KEY: "",
      INTERNAL_TOKEN: "",
    });
    const created = await cli("partner", "create", "--name", "Found Lending", "--fee-bps", "150", "--json");
    expect(created.code, created.stderr).toBe(0);
    const partner = JSON.parse(created.stdout) as { id: string };
    const listed = await cli("partner", "list", "--json");
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(partner.id);
    // The entry holds addresses, never the token, and only its owner may read it.
    const [entry] = await fs.readdir(registryDir(tmp));
    const file = path.join(registryDir(tmp), entry ?? "");
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect(await fs.readFile(file, "utf8")).not.toContain(
      (await fs.readFile(path.join(dataDir, "internal-token"), "utf8")).trim(),
    );

    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
    expect(await fs.readdir(registryDir(tmp))).toEqual([]);
    const after = await cli("partner", "list");
    expect(after.code).toBe(1);
    expect(after.stderr).toContain("DATA_DIR");
  }, 120_000);
});
