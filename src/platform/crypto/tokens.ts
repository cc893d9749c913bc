import { hash, randomBytes, timingSafeEqual } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A uniformly random base62 string (rejection sampling, so no character is more likely than another). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/** SHA-256 of a secret, as stored at rest. */
export function sha256(value: string): Buffer {
  return hash("sha256", value, "buffer");
}

/** SHA-256 of a secret as hex (one-shot, no intermediate objects: this runs on every request). */
export function sha256Hex(value: string): string {
  return hash("sha256", value, "hex");
}

/** Constant-time equality of two byte strings of any length. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) {
    // Still spend the time of a comparison, so the length is the only thing that leaks.
    timingSafeEqual(Buffer.from(a), Buffer.from(a));
    return false;
  }
  return timingSafeEqual(a, b);
}

/** Constant-time equality of two strings (compared as SHA-256 digests, so lengths do not leak either). */
export function constantTimeEqualStrings(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}
