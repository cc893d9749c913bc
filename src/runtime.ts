import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { type Config, dataFiles, parseMasterKey } from "./config.ts";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "./platform/db/embedded.ts";
import type { Logger } from "./platform/logger.ts";

/** The secrets and database the service runs with, after the embedded default has filled in the gaps. */
export interface Runtime {
  databaseUrl: string;
  /** A session on the primary itself (DATABASE_DIRECT_URL), for migrations and pg-boss; else `databaseUrl`. */
  directUrl: string;
  masterKey: Buffer;
  /** Further keys that only open (a master key rotation). */
  acceptedMasterKeys: Buffer[];
  internalToken: string;
  embedded: EmbeddedDatabase | undefined;
}

/** Reads a secret file, or creates it with `make()` (mode 0600) and says so in the log. */
async function secretFile(file: string, make: () => string, what: string, logger: Logger): Promise<string> {
  try {
    return (await fs.readFile(file, "utf8")).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const value = make();
  await fs.writeFile(file, `${value}\n`, { mode: 0o600, flag: "wx" });
  logger.warn(`generated a development ${what}; production deployments set it in the environment`, { file });
  return value;
}

/**
 * With DATABASE_URL unset, starts the embedded PostgreSQL in DATA_DIR and takes the master key and the
 * internal token from DATA_DIR, generating them on first start. With DATABASE_URL set, nothing is
 * generated: MASTER_KEY and INTERNAL_TOKEN come from the environment (loadConfig insists).
 */
export async function resolveRuntime(config: Readonly<Config>, logger: Logger): Promise<Runtime> {
  if (config.databaseUrl) {
    if (!config.masterKey || !config.internalToken)
      throw new Error("MASTER_KEY and INTERNAL_TOKEN are required");
    return {
      databaseUrl: config.databaseUrl,
      directUrl: config.directUrl ?? config.databaseUrl,
      masterKey: config.masterKey,
      acceptedMasterKeys: config.acceptedMasterKeys,
      internalToken: config.internalToken,
      embedded: undefined,
    };
  }
  await fs.mkdir(config.dataDir, { recursive: true });
  const masterKey =
    config.masterKey ??
    parseMasterKey(
      await secretFile(
        path.join(config.dataDir, dataFiles.masterKey),
        () => randomBytes(32).toString("hex"),
        "master key",
        logger,
      ),
      `${config.dataDir}/${dataFiles.masterKey}`,
    );
  const internalToken =
    config.internalToken ??
    (await secretFile(
      path.join(config.dataDir, dataFiles.internalToken),
      () => `itk_${randomBytes(24).toString("base64url")}`,
      "internal API token",
      logger,
    ));
  // In a session of its own: a terminal's Ctrl-C reaches the service alone, which drains, then stops it.
  const embedded = await startEmbeddedPostgres({
    dataDir: config.dataDir,
    database: "partner_api",
    logger,
    ownSession: true,
  });
  return {
    databaseUrl: embedded.url,
    directUrl: embedded.url,
    masterKey,
    acceptedMasterKeys: config.acceptedMasterKeys,
    internalToken,
    embedded,
  };
}
