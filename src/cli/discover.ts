import fs from "node:fs/promises";
import path from "node:path";
import { dataFiles } from "../config.ts";

/** Where the internal API is and the token it takes. */
export interface Target {
  url: string;
  token: string;
}

/**
 * Finds the internal API: INTERNAL_URL and INTERNAL_TOKEN when set, else the service started by `npm start`
 * with the same DATA_DIR (it writes its address to DATA_DIR/service.json, its token to DATA_DIR/internal-token).
 */
export async function discoverTarget(env: NodeJS.ProcessEnv = process.env): Promise<Target> {
  if (env.INTERNAL_URL || env.INTERNAL_TOKEN) {
    if (!env.INTERNAL_URL || !env.INTERNAL_TOKEN)
      throw new Error("set both INTERNAL_URL and INTERNAL_TOKEN, or neither");
    return { url: env.INTERNAL_URL, token: env.INTERNAL_TOKEN };
  }
  const dataDir = path.resolve(env.DATA_DIR || "./.data");
  let service: { internalUrl?: string };
  try {
    service = JSON.parse(await fs.readFile(path.join(dataDir, dataFiles.service), "utf8"));
  } catch {
    throw new Error(
      `no running service found in ${dataDir}: start it with \`npm start\`, or set INTERNAL_URL and INTERNAL_TOKEN`,
    );
  }
  const token = (await fs.readFile(path.join(dataDir, dataFiles.internalToken), "utf8")).trim();
  if (!service.internalUrl) throw new Error(`${dataDir}/${dataFiles.service} has no internalUrl`);
  return { url: service.internalUrl, token };
}
