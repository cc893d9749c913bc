import fs from "node:fs/promises";
import path from "node:path";
import { dataFiles } from "../config.ts";
import { runningServices } from "../running-services.ts";

/** Where the internal API is and the token it takes. */
export interface Target {
  url: string;
  token: string;
}

const HOW =
  "start it with `npm start`, run the CLI with the DATA_DIR the service was started with " +
  "(DATA_DIR=<dir> npm run cli -- …), or point it at one with INTERNAL_URL and INTERNAL_TOKEN";

function alive(pid: unknown): boolean {
  if (typeof pid !== "number") return true; // written before pids were recorded: let the call say
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The internal API of the service running with `dataDir`, if one is. */
async function inDataDir(dataDir: string): Promise<Target | undefined> {
  const service = await fs
    .readFile(path.join(dataDir, dataFiles.service), "utf8")
    .then((text) => JSON.parse(text) as { internalUrl?: string; pid?: number })
    .catch(() => undefined);
  if (!service?.internalUrl || !alive(service.pid)) return undefined;
  const token = await fs.readFile(path.join(dataDir, dataFiles.internalToken), "utf8").catch(() => undefined);
  if (token === undefined) {
    throw new Error(
      `the service in DATA_DIR ${dataDir} was started with its own INTERNAL_TOKEN: set INTERNAL_URL=${service.internalUrl} and INTERNAL_TOKEN`,
    );
  }
  return { url: service.internalUrl, token: token.trim() };
}

/**
 * Finds the internal API: INTERNAL_URL and INTERNAL_TOKEN when set; else the service started by `npm start`
 * with DATA_DIR (it writes its address to DATA_DIR/service.json, its token to DATA_DIR/internal-token); else,
 * with DATA_DIR unset and nothing running in ./.data, the one service of this user running with another
 * DATA_DIR (they list themselves under the temporary directory while they run).
 */
export async function discoverTarget(env: NodeJS.ProcessEnv = process.env): Promise<Target> {
  if (env.INTERNAL_URL || env.INTERNAL_TOKEN) {
    if (!env.INTERNAL_URL || !env.INTERNAL_TOKEN)
      throw new Error("set both INTERNAL_URL and INTERNAL_TOKEN, or neither");
    return { url: env.INTERNAL_URL, token: env.INTERNAL_TOKEN };
  }
  const dataDir = path.resolve(env.DATA_DIR || "./.data");
  const here = await inDataDir(dataDir);
  if (here) return here;
  if (env.DATA_DIR) throw new Error(`no running service found in DATA_DIR ${dataDir}: ${HOW}`);
  const others = await runningServices();
  const [only] = others;
  if (others.length === 1 && only) {
    const target = await inDataDir(only.dataDir);
    if (target) return target;
  }
  if (others.length > 1) {
    const dirs = others.map((s) => `DATA_DIR=${s.dataDir}`).join(", ");
    throw new Error(
      `no service runs in ./.data (DATA_DIR unset) and ${others.length} run elsewhere (${dirs}): run the CLI with the DATA_DIR of the one you mean`,
    );
  }
  throw new Error(`no running service found: none in ./.data (DATA_DIR unset) and none elsewhere; ${HOW}`);
}
