import { ConfigError, type Env } from "./env.ts";

/** The keys that seal secrets at rest and the token of the internal API. */
export interface SecretSettings {
  /** 32-byte key that encrypts private keys and secrets at rest. Required with `databaseUrl`. */
  masterKey: Buffer | undefined;
  /**
   * Further master keys whose sealed values may be opened (never sealed with): MASTER_KEYS_ACCEPTED, comma
   * separated. They carry a master key rotation (docs/operations.md).
   */
  acceptedMasterKeys: Buffer[];
  /** Token the internal API requires. Required with `databaseUrl`. */
  internalToken: string | undefined;
}

/** Decodes MASTER_KEY: 32 bytes as 64 hex digits or base64. */
export function parseMasterKey(raw: string, name = "MASTER_KEY"): Buffer {
  const trimmed = raw.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : Buffer.from(trimmed, "base64");
  if (key.length !== 32) throw new ConfigError(`${name} must be 32 bytes, as 64 hex digits or base64`);
  return key;
}

/**
 * Reads MASTER_KEY, MASTER_KEYS_ACCEPTED and INTERNAL_TOKEN. With a DATABASE_URL (a deployment) the master key
 * and the token are required; only the embedded default generates its own (runtime.ts).
 */
export function readSecretSettings(env: Env, databaseUrl: string | undefined): SecretSettings {
  const masterKey = env.MASTER_KEY ? parseMasterKey(env.MASTER_KEY) : undefined;
  const acceptedMasterKeys = (env.MASTER_KEYS_ACCEPTED ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean)
    .map((k, i) => parseMasterKey(k, `MASTER_KEYS_ACCEPTED (key ${i + 1})`));
  const internalToken = env.INTERNAL_TOKEN || undefined;
  if (internalToken !== undefined && internalToken.length < 24) {
    throw new ConfigError("INTERNAL_TOKEN must be at least 24 characters");
  }
  if (databaseUrl && !masterKey) {
    throw new ConfigError(
      "MASTER_KEY is required with DATABASE_URL (only the embedded default generates one)",
    );
  }
  if (databaseUrl && !internalToken) {
    throw new ConfigError(
      "INTERNAL_TOKEN is required with DATABASE_URL (only the embedded default generates one)",
    );
  }
  return { masterKey, acceptedMasterKeys, internalToken };
}
