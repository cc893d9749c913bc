import { createCipheriv, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createSecretBox, masterKeyId } from "../../src/platform/crypto/secret-box.ts";
import { constantTimeEqual, randomBase62, sha256 } from "../../src/platform/crypto/tokens.ts";

describe("secret box", () => {
  const box = createSecretBox(randomBytes(32));

  it("round-trips and never repeats a ciphertext", () => {
    const secret = Buffer.from("private key bytes");
    const a = box.seal(secret, "kid-1");
    const b = box.seal(secret, "kid-1");
    expect(a.equals(b)).toBe(false);
    expect(box.open(a, "kid-1").equals(secret)).toBe(true);
  });

  it("refuses a ciphertext moved to another row, a tampered one, or another master key", () => {
    const sealed = box.seal(Buffer.from("x"), "kid-1");
    expect(() => box.open(sealed, "kid-2")).toThrow();
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1] = (tampered[tampered.length - 1] ?? 0) ^ 1;
    expect(() => box.open(tampered, "kid-1")).toThrow();
    expect(() => createSecretBox(randomBytes(32)).open(sealed, "kid-1")).toThrow();
    expect(() => createSecretBox(randomBytes(16))).toThrow();
  });
});

describe("master key rotation", () => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  // What a box sealed before sealed values named their key: version 1 | iv | tag | ciphertext.
  const sealV1 = (key: Buffer, plaintext: string, aad: string) => {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", key, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return Buffer.concat([Buffer.of(1), iv, cipher.getAuthTag(), body]);
  };

  it("seals under the current key and names it, so values under another key can be found", () => {
    const box = createSecretBox(newKey, [oldKey]);
    const sealed = box.seal(Buffer.from("s"), "row-1");
    expect(sealed.subarray(0, box.currentPrefix.length).equals(box.currentPrefix)).toBe(true);
    expect(box.currentPrefix.equals(Buffer.concat([Buffer.of(2), masterKeyId(newKey)]))).toBe(true);
    // The id is not the key, nor a piece of it.
    expect(newKey.includes(masterKeyId(newKey))).toBe(false);
    expect(() => createSecretBox(oldKey).open(sealed, "row-1")).toThrow(/not given/);
  });

  it("opens what an accepted key sealed, before and after the switch, and values from before key ids", () => {
    const before = createSecretBox(oldKey, [newKey]).seal(Buffer.from("a"), "row-1");
    const after = createSecretBox(newKey, [oldKey]);
    expect(after.open(before, "row-1").toString()).toBe("a");
    expect(after.open(sealV1(oldKey, "legacy", "row-2"), "row-2").toString()).toBe("legacy");
    expect(after.open(sealV1(newKey, "legacy", "row-2"), "row-2").toString()).toBe("legacy");
    // Without the old key, neither opens; the associated data still binds the row.
    expect(() => createSecretBox(newKey).open(before, "row-1")).toThrow();
    expect(() => createSecretBox(newKey).open(sealV1(oldKey, "legacy", "row-2"), "row-2")).toThrow();
    expect(() => after.open(sealV1(oldKey, "legacy", "row-2"), "row-3")).toThrow();
  });
});

describe("tokens", () => {
  it("makes base62 strings of the asked length from every character", () => {
    const s = Array.from({ length: 200 }, () => randomBase62(32)).join("");
    expect(s).toMatch(/^[0-9A-Za-z]+$/);
    expect(new Set(s).size).toBe(62);
  });

  it("compares in constant time, whatever the lengths", () => {
    expect(constantTimeEqual(sha256("a"), sha256("a"))).toBe(true);
    expect(constantTimeEqual(sha256("a"), sha256("b"))).toBe(false);
    expect(constantTimeEqual(Buffer.from("ab"), Buffer.from("abc"))).toBe(false);
  });
});
