import { createHmac, createSecretKey, KeyObject } from "node:crypto";

const keyObjects = new WeakMap<Uint8Array, KeyObject>();

/**
 * The key as a `KeyObject`, made once per key. Node 24.21 checks a Buffer key against `KeyObject` and
 * `CryptoKey` on every `createHmac` and `createCipheriv`, which costs about 30 µs a call against 4 µs with a
 * `KeyObject` (the ledger ingest hashes one counterparty per entry). Keys passed here are never mutated.
 */
export function secretKeyOf(key: Uint8Array | KeyObject): KeyObject {
  if (key instanceof KeyObject) return key;
  let made = keyObjects.get(key);
  if (!made) {
    made = createSecretKey(key);
    keyObjects.set(key, made);
  }
  return made;
}

/**
 * A key for one purpose, derived from the master key (HMAC-SHA256 of the label), so one secret in the
 * environment serves several uses without any two sharing a key.
 */
export function deriveKey(masterKey: Uint8Array, label: string): Buffer {
  return createHmac("sha256", secretKeyOf(masterKey)).update(`partner-api:${label}`).digest();
}

/** A keyed hash (HMAC-SHA256) for looking a value up without storing it in the clear. */
export function keyedHash(key: Uint8Array | KeyObject, value: string): Buffer {
  return createHmac("sha256", secretKeyOf(key)).update(value, "utf8").digest();
}
