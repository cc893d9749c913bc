import { createHmac } from "node:crypto";

/**
 * A key for one purpose, derived from the master key (HMAC-SHA256 of the label), so one secret in the
 * environment serves several uses without any two sharing a key.
 */
export function deriveKey(masterKey: Uint8Array, label: string): Buffer {
  return createHmac("sha256", masterKey).update(`partner-api:${label}`).digest();
}

/** A keyed hash (HMAC-SHA256) for looking a value up without storing it in the clear. */
export function keyedHash(key: Uint8Array, value: string): Buffer {
  return createHmac("sha256", key).update(value, "utf8").digest();
}
