import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { quickstartBlocks } from "../support/quickstart.ts";

// The README's quickstart, exactly as written: its code blocks, in order, run by plain Node as a partner
// would run them, importing only the SDK package.
const root = path.resolve(import.meta.dirname, "../..");
let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

async function quickstartSource(): Promise<string> {
  const blocks = await quickstartBlocks();
  expect(blocks.length).toBeGreaterThanOrEqual(5);
  return blocks.join("\n");
}

describe("the README quickstart", () => {
  it("runs top to bottom against a server on port 0, using only the SDK", async () => {
    const source = await quickstartSource();
    expect(source).not.toMatch(/from\s+["']\.{1,2}\//); // nothing but the package and Node itself
    const dir = path.join(root, "tmp");
    await fs.mkdir(dir, { recursive: true });
    const file = path.join(dir, `quickstart-${randomBytes(4).toString("hex")}.ts`);
    await fs.writeFile(file, source);
    const tsconfig = path.join(dir, `tsconfig-${path.basename(file, ".ts")}.json`);
    await fs.writeFile(
      tsconfig,
      JSON.stringify({
        extends: "../tsconfig.json",
        compilerOptions: { noEmit: true },
        include: [path.basename(file)],
      }),
    );
    try {
      // It type-checks against the package's published declarations...
      await promisify(execFile)(
        process.execPath,
        [path.join(root, "node_modules/typescript/bin/tsc"), "-p", tsconfig],
        {
          cwd: root,
        },
      ).catch((err: { stdout: string }) => {
        throw new Error(`the quickstart does not type-check:\n${err.stdout}`);
      });
      // ...and runs.
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        cwd: root,
        env: { ...process.env, BASE_URL: t.partnerUrl, API_KEY: p.sandboxKey },
        timeout: 60_000,
      });
      const lines = stdout.trim().split("\n");
      expect(lines.map((l) => l.slice(0, 2))).toEqual(["1.", "2.", "3.", "4.", "5.", "6.", "7."]);
      expect(lines[1]).toMatch(/^2\. consent granted cns_/);
      expect(lines[2]).toMatch(/^3\. verified snapshot: tier Trusted inflow \d+/);
      expect(lines[3]).toMatch(/^4\. offered dsb_\S+ to accept at http:\/\/\S+\/mandate\/[0-9A-Za-z]{32}$/);
      // Amounts print as plain numbers (kobo), not as bigint literals.
      expect(lines[4]).toMatch(/^5\. accepted and delivered dsb_\S+ fee 75000$/);
      expect(lines[5]).toMatch(/^6\. repayment collected rpy_/);
      expect(lines[6]).toMatch(/^7\. webhook subscription removed whk_/);
      // Run after run, no subscription is left behind to a closed port.
      const left = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey });
      expect(left.body).toEqual([]); // REST returns the array as the body
    } finally {
      await fs.rm(file, { force: true });
      await fs.rm(tsconfig, { force: true });
    }
  });
});
