import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { dataFiles } from "./config.ts";
import { processAlive } from "./platform/processes.ts";

/**
 * Services started with `npm start` (on the embedded PostgreSQL) list themselves here for as long as they run,
 * one file per process, so that `npm run cli` finds one started with any DATA_DIR. An entry holds addresses
 * only: the internal token stays in its DATA_DIR. An entry whose process is gone (a `kill -9`) is ignored and
 * cleared by the next reader.
 */
export interface RunningService {
  pid: number;
  /** The service's DATA_DIR (absolute). */
  dataDir: string;
  partnerUrl: string | undefined;
  internalUrl: string;
  startedAt: string;
}

/** This user's directory of running services: `<tmpdir>/partner-api-<uid>`. */
export function registryDir(tmpdir = os.tmpdir()): string {
  const user = process.getuid?.() ?? os.userInfo().username;
  return path.join(tmpdir, `partner-api-${user}`);
}

/**
 * Whether `dir` is this user's own, private directory: in a shared temporary directory anyone may have made a
 * directory of that name first, and entries there would point the CLI at their listener.
 */
async function ownPrivateDir(dir: string): Promise<boolean> {
  const st = await fs.lstat(dir).catch(() => undefined);
  if (!st?.isDirectory()) return false;
  const uid = process.getuid?.();
  return uid === undefined || (st.uid === uid && (st.mode & 0o077) === 0);
}

/**
 * Lists this process in the registry; resolves with what removes it (at stop). Throws when the registry
 * directory is not this user's own.
 */
export async function registerService(
  entry: RunningService,
  dir = registryDir(),
): Promise<() => Promise<void>> {
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  if (!(await ownPrivateDir(dir))) throw new Error(`${dir} is not a private directory of this user`);
  const file = path.join(dir, `${entry.pid}.json`);
  await fs.writeFile(file, JSON.stringify(entry), { mode: 0o600 });
  return () => fs.rm(file, { force: true });
}

/** The services of this user running now, oldest first; entries of processes that are gone are removed. */
export async function runningServices(dir = registryDir()): Promise<RunningService[]> {
  if (!(await ownPrivateDir(dir))) return [];
  const found: RunningService[] = [];
  for (const name of await fs.readdir(dir).catch(() => [])) {
    if (!/^\d+\.json$/.test(name)) continue;
    const file = path.join(dir, name);
    const entry = await fs
      .readFile(file, "utf8")
      .then((text) => JSON.parse(text) as RunningService)
      .catch(() => undefined);
    if (entry && (await stillRunning(entry))) found.push(entry);
    else await fs.rm(file, { force: true });
  }
  return found.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
}

/** Alive, and still the process its DATA_DIR names (a pid the system has since given to another is not). */
async function stillRunning(entry: RunningService): Promise<boolean> {
  if (!Number.isInteger(entry.pid) || !processAlive(entry.pid) || typeof entry.dataDir !== "string")
    return false;
  const service = await fs
    .readFile(path.join(entry.dataDir, dataFiles.service), "utf8")
    .then((text) => JSON.parse(text) as { pid?: number })
    .catch(() => undefined);
  return service?.pid === entry.pid;
}
