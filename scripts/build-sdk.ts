/**
 * Builds the partner SDK (`src/sdk`, with the generated partner messages it uses) into `packages/sdk/dist`,
 * the files of the `@partner-underwriting/sdk` package: `index.js` for Node and bundlers (npm dependencies
 * left as imports, declared in `packages/sdk/package.json`), `browser.js` for a `<script type="module">`
 * (everything bundled), and type declarations. Runs on `npm install` (the root `prepare` script), before
 * `npm test`, before `npm pack` of the package (its `prepack` script), and on its own with `npm run build:sdk`.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { type BuildOptions, build } from "esbuild";

const root = path.resolve(import.meta.dirname, "..");
const out = path.join(root, "packages/sdk/dist");
const entry = path.join(root, "src/sdk/index.ts");

await fs.rm(out, { recursive: true, force: true });
const common: BuildOptions = {
  entryPoints: [entry],
  bundle: true,
  format: "esm",
  target: "es2022",
  logLevel: "warning",
};
await build({ ...common, outfile: path.join(out, "index.js"), platform: "neutral", packages: "external" });
await build({ ...common, outfile: path.join(out, "browser.js"), platform: "browser", minify: true });

// Declarations, with the source's `.ts` specifiers turned into the `.js` ones a consumer resolves.
execFileSync(
  process.execPath,
  [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.sdk.json"],
  {
    cwd: root,
    stdio: "inherit",
  },
);
const types = path.join(out, "types");
for (const file of await fs.readdir(types, { recursive: true })) {
  if (!file.endsWith(".d.ts")) continue;
  const full = path.join(types, file);
  const text = await fs.readFile(full, "utf8");
  await fs.writeFile(full, text.replace(/(from\s+["'][^"']+)\.ts(["'])/g, "$1.js$2"));
}
console.log(`built the SDK into ${path.relative(root, out)}`);
