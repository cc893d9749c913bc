import { afterEach, describe, expect, it } from "vitest";
import { hashPassword, verifyPassword } from "../../src/portal/password.ts";

const asked = process.env.TEST_PASSWORD_HASH_LOG_N;
afterEach(() => {
  if (asked === undefined) delete process.env.TEST_PASSWORD_HASH_LOG_N;
  else process.env.TEST_PASSWORD_HASH_LOG_N = asked;
});

describe("portal password hashes", () => {
  it("are made at OWASP's scrypt cost unless the test hook asks for less, and verify at the cost they carry", async () => {
    delete process.env.TEST_PASSWORD_HASH_LOG_N;
    const real = await hashPassword("correct horse battery staple");
    expect(real).toMatch(/^scrypt\$17\$8\$1\$/);
    process.env.TEST_PASSWORD_HASH_LOG_N = "12";
    const cheap = await hashPassword("correct horse battery staple");
    expect(cheap).toMatch(/^scrypt\$12\$8\$1\$/);
    // Each verifies with the parameters stored in it, whatever the cost of new hashes is now.
    expect(await verifyPassword("correct horse battery staple", real)).toBe(true);
    delete process.env.TEST_PASSWORD_HASH_LOG_N;
    expect(await verifyPassword("correct horse battery staple", cheap)).toBe(true);
    expect(await verifyPassword("correct horse battery stapler", cheap)).toBe(false);
  });

  it("refuse a test cost outside 2^10 to 2^17", async () => {
    for (const bad of ["9", "18", "12.5", "x"]) {
      process.env.TEST_PASSWORD_HASH_LOG_N = bad;
      await expect(hashPassword("correct horse battery staple")).rejects.toThrow(/TEST_PASSWORD_HASH_LOG_N/);
    }
  });
});
