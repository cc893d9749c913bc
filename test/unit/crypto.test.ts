import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createSecretBox } from "../../src/platform/crypto/secret-box.ts";
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
