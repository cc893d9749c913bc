import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { root } from "./process.ts";

/** The README quickstart's code blocks, in order (together, one program). */
export async function quickstartBlocks(): Promise<string[]> {
  const readme = await fs.readFile(path.join(root, "README.md"), "utf8");
  const section = /<!-- quickstart:start -->([\s\S]*?)<!-- quickstart:end -->/.exec(readme)?.[1];
  if (!section) throw new Error("README.md has no quickstart section");
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
}

/**
 * Runs the quickstart as a partner does (`BASE_URL=… API_KEY=… npx node quickstart.ts`, from a file in the
 * repository) and returns the lines it printed.
 */
export async function runQuickstart(baseUrl: string, apiKey: string): Promise<string[]> {
  const dir = path.join(root, "tmp");
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `quickstart-${randomBytes(4).toString("hex")}.ts`);
  await fs.writeFile(file, (await quickstartBlocks()).join("\n"));
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      cwd: root,
      env: { ...process.env, BASE_URL: baseUrl, API_KEY: apiKey },
      timeout: 60_000,
    });
    return stdout.trim().split("\n");
  } finally {
    await fs.rm(file, { force: true });
  }
}
