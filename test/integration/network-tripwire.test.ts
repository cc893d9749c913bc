import { spawn } from "node:child_process";
import path from "node:path";
import { expect, it } from "vitest";
import { createTestDatabase } from "../support/db.ts";
import { root } from "../support/process.ts";

// The suite runs under a tripwire (test/support/network-tripwire.ts) that fails any test in which a network
// call starts inside a database transaction. Here it judges two cases in a vitest of their own: the call
// after the commit passes; the one inside the transaction fails its test, naming the call and where it began.
it("fails a test that calls out inside a transaction, and only that one", async () => {
  const databaseUrl = await createTestDatabase();
  const config = path.join(root, "test/fixtures/network-tripwire/vitest.config.ts");
  const child = spawn(
    process.execPath,
    [path.join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", config],
    {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, NO_COLOR: "1", FORCE_COLOR: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout.on("data", (d) => {
    out += String(d);
  });
  child.stderr.on("data", (d) => {
    out += String(d);
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  expect(code, out).toBe(1);
  expect(out).toMatch(/✓ calls out after the commit/);
  expect(out).toMatch(/× calls out inside the transaction/);
  expect(out).toMatch(/1 network call\(s\) started inside a database transaction/);
  expect(out).toMatch(/fetch GET http:\/\/127\.0\.0\.1:\d+ \(holding a transaction\)/);
  expect(out).toMatch(/transaction\.case\.ts/);
  expect(out).toMatch(/Tests {2}1 failed \| 1 passed/);
});
