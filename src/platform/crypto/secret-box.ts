import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { secretKeyOf } from "./keys.ts";

/** Sealed before master keys had ids: version(1) | iv(12) | tag(16) | ciphertext. Still opened. */
const V1 = 1;
/** version(1) | key id(8) | iv(12) | tag(16) | ciphertext. */
const V2 = 2;
const KEY_ID_BYTES = 8;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Encrypts secrets at rest with AES-256-GCM under the master key (CONTRACT.md §3). The associated data
 * binds a ciphertext to the row it belongs to (for example a key id), so a ciphertext copied onto another
 * row fails to open.
 *
 * A box holds the current master key, which seals, and any number of accepted ones, which only open: that
 * is how the master key is rotated without stopping (docs/operations.md). Every sealed value names the key
 * it was sealed under by an id derived from the key (it reveals nothing of it).
 */
export interface SecretBox {
  seal(plaintext: Uint8Array, associatedData: string): Buffer;
  open(sealed: Uint8Array, associatedData: string): Buffer;
  /**
   * The first bytes of every value sealed under the current key: a value that does not start with them is
   * under another key and due to be sealed again (`npm run db:rekey`).
   */
  readonly currentPrefix: Buffer;
}

/** The id a master key is known by in what it sealed: 8 bytes of an HMAC keyed by it. */
export function masterKeyId(key: Uint8Array): Buffer {
  return createHmac("sha256", secretKeyOf(key))
    .update("partner-api:master-key-id")
    .digest()
    .subarray(0, KEY_ID_BYTES);
}

const checkKey = (key: Uint8Array) => {
  if (key.length !== 32) throw new Error("a master key must be 32 bytes");
  return Buffer.from(key);
};

function decrypt(key: Buffer, iv: Buffer, tag: Buffer, body: Buffer, associatedData: string): Buffer {
  const decipher = createDecipheriv("aes-256-gcm", secretKeyOf(key), iv);
  decipher.setAAD(Buffer.from(associatedData, "utf8"));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(body), decipher.final()]);
}

/** Creates a {@link SecretBox} that seals under `current` and opens what `current` or `accepted` sealed. */
export function createSecretBox(current: Uint8Array, accepted: readonly Uint8Array[] = []): SecretBox {
  const key = checkKey(current);
  const keys = [key, ...accepted.map(checkKey)];
  const byId = new Map(keys.map((k) => [masterKeyId(k).toString("hex"), k] as const));
  const currentPrefix = Buffer.concat([Buffer.of(V2), masterKeyId(key)]);
  return {
    currentPrefix,
    seal(plaintext, associatedData) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", secretKeyOf(key), iv);
      cipher.setAAD(Buffer.from(associatedData, "utf8"));
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return Buffer.concat([currentPrefix, iv, cipher.getAuthTag(), body]);
    },
    open(sealed, associatedData) {
      const buf = Buffer.from(sealed);
      if (buf[0] === V2 && buf.length >= 1 + KEY_ID_BYTES + IV_BYTES + TAG_BYTES) {
        const id = buf.subarray(1, 1 + KEY_ID_BYTES).toString("hex");
        const k = byId.get(id);
        if (!k) throw new Error(`sealed under a master key this instance is not given (key id ${id})`);
        const at = 1 + KEY_ID_BYTES;
        return decrypt(
          k,
          buf.subarray(at, at + IV_BYTES),
          buf.subarray(at + IV_BYTES, at + IV_BYTES + TAG_BYTES),
          buf.subarray(at + IV_BYTES + TAG_BYTES),
          associatedData,
        );
      }
      if (buf[0] === V1 && buf.length >= 1 + IV_BYTES + TAG_BYTES) {
        // No key id: the tag tells which key it was (GCM refuses every other one).
        const iv = buf.subarray(1, 1 + IV_BYTES);
        const tag = buf.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
        const body = buf.subarray(1 + IV_BYTES + TAG_BYTES);
        let failure: unknown;
        for (const k of keys) {
          try {
            return decrypt(k, iv, tag, body, associatedData);
          } catch (err) {
            failure = err;
          }
        }
        throw failure;
      }
      throw new Error("sealed secret has an unknown format");
    },
  };
}
