import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { registerService, registryDir, runningServices } from "../../src/running-services.ts";

let tmp: string;
let dataDir: string;
const entry = () => ({
  pid: process.pid,
  dataDir,
  partnerUrl: "http://127.0.0.1:8080",
  internalUrl: "http://127.0.0.1:9090",
  startedAt: new Date().toISOString(),
});

beforeEach(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-registry-"));
  dataDir = path.join(tmp, "data");
  await fs.mkdir(dataDir);
  await fs.writeFile(path.join(dataDir, "service.json"), JSON.stringify({ pid: process.pid }));
});
afterEach(() => fs.rm(tmp, { recursive: true, force: true }));

describe("the registry of running services", () => {
  it("lists a service while it runs, in a directory of this user's own, and forgets it at stop", async () => {
    const dir = registryDir(tmp);
    expect(path.basename(dir)).toBe(`partner-api-${process.getuid?.() ?? os.userInfo().username}`);
    const running = entry();
    const unregister = await registerService(running, dir);
    expect((await fs.stat(dir)).mode & 0o777).toBe(0o700);
    expect(await runningServices(dir)).toEqual([running]);
    await unregister();
    expect(await runningServices(dir)).toEqual([]);
  });

  it("ignores and clears entries of processes that are gone, or whose pid another process has since", async () => {
    const dir = registryDir(tmp);
    await registerService({ ...entry(), pid: 2 ** 22 + 1 }, dir); // above Linux's highest pid: never alive
    await fs.writeFile(path.join(dataDir, "service.json"), JSON.stringify({ pid: 1 }));
    await registerService(entry(), dir); // alive, but DATA_DIR names another process now
    await fs.writeFile(path.join(dir, "7.json"), "{ not json");
    expect(await runningServices(dir)).toEqual([]);
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it("trusts no directory others may write to", async () => {
    const dir = registryDir(tmp);
    await fs.mkdir(dir, { mode: 0o777 });
    await fs.chmod(dir, 0o777);
    await expect(registerService(entry(), dir)).rejects.toThrow(/not a private directory/);
    await fs.writeFile(path.join(dir, `${process.pid}.json`), JSON.stringify(entry()));
    expect(await runningServices(dir)).toEqual([]);
  });
});
