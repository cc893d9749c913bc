import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Encrypts secrets at rest with AES-256-GCM under the master key (CONTRACT.md §3). The associated data
 * binds a ciphertext to the row it belongs to (for example a key id), so a ciphertext copied onto another
 * row fails to open.
 */
export interface SecretBox {
  seal(plaintext: Uint8Array, associatedData: string): Buffer;
  open(sealed: Uint8Array, associatedData: string): Buffer;
}

/** Creates a {@link SecretBox} over a 32-byte master key. Layout: version(1) | iv(12) | tag(16) | ciphertext. */
export function createSecretBox(masterKey: Uint8Array): SecretBox {
  if (masterKey.length !== 32) throw new Error("the master key must be 32 bytes");
  const key = Buffer.from(masterKey);
  return {
    seal(plaintext, associatedData) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(associatedData, "utf8"));
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return Buffer.concat([Buffer.of(VERSION), iv, cipher.getAuthTag(), body]);
    },
    open(sealed, associatedData) {
      const buf = Buffer.from(sealed);
      if (buf.length < 1 + IV_BYTES + TAG_BYTES || buf[0] !== VERSION) {
        throw new Error("sealed secret has an unknown format");
      }
      const iv = buf.subarray(1, 1 + IV_BYTES);
      const tag = buf.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
      const decipher = createDecipheriv("aes-256-gcm", key, iv);
      decipher.setAAD(Buffer.from(associatedData, "utf8"));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(buf.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
    },
  };
}
