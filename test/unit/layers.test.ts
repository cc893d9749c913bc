import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The layer rules are Biome's (biome.json extends biome.layers.json, written by scripts/layers.ts): a back-edge
// fails `npm run lint` with the rule's message. Checked here on a copy of the configuration and small source
// trees, so the repository's own files are never touched.
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");
const biome = path.join(root, "node_modules/.bin/biome");
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "layers-"));
  for (const f of ["biome.json", "biome.layers.json"]) await cp(path.join(root, f), path.join(dir, f));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Lints one file written at `file` (under the copy's src/) and returns Biome's diagnostics. */
async function lint(file: string, source: string): Promise<{ ok: boolean; output: string }> {
  const full = path.join(dir, file);
  await mkdir(path.dirname(full), { recursive: true });
  await writeFile(full, source);
  try {
    const { stdout, stderr } = await run(biome, ["lint", "--vcs-enabled=false", file], { cwd: dir });
    return { ok: true, output: stdout + stderr };
  } catch (err) {
    const e = err as { stdout: string; stderr: string };
    return { ok: false, output: e.stdout + e.stderr };
  } finally {
    await rm(full);
  }
}

describe("the layer rules", () => {
  it("refuse the platform importing a feature", async () => {
    const r = await lint(
      "src/platform/back-edge.ts",
      'export { type UserService } from "../users/user.service.ts";\n',
    );
    expect(r.ok).toBe(false);
    expect(r.output).toContain("The platform imports no feature");
  });

  it("refuse a feature importing one after it, or another feature's repository", async () => {
    const later = await lint(
      "src/users/back-edge.ts",
      'export type { ConsentService } from "../consent/consent.service.ts";\n',
    );
    expect(later.ok).toBe(false);
    expect(later.output).toContain("users imports only the features before it");
    const repo = await lint(
      "src/consent/peek.ts",
      'export { userRepository } from "../users/user.repository.ts";\n',
    );
    expect(repo.ok).toBe(false);
    expect(repo.output).toContain("consent imports only the features before it");
  });

  it("refuse a feature or the edge importing the composition root", async () => {
    const feature = await lint("src/consent/up.ts", 'export type { Config } from "../config.ts";\n');
    expect(feature.output).toContain("A feature never imports the edge or the composition root");
    const edge = await lint("src/edge/up.ts", 'export type { Services } from "../services.ts";\n');
    expect(edge.output).toContain("The edge imports nothing of the composition root");
  });

  it("let a feature call a service of a feature before it", async () => {
    const r = await lint(
      "src/consent/fine.ts",
      'export type { UserService } from "../users/user.service.ts";\n',
    );
    expect(r.output).not.toContain("noRestrictedImports");
    expect(r.ok).toBe(true);
  });

  it("are what scripts/layers.ts says", async () => {
    await expect(
      run(process.execPath, [path.join(root, "scripts/layers.ts"), "--check"]),
    ).resolves.toBeDefined();
  });
});
