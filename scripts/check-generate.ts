// Fails when gen/ is not exactly what `buf generate` makes from proto/, or when the protos fail lint or format.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const buf = path.join(root, "node_modules/.bin/buf");
const run = (args: string[]) =>
  execFileSync(buf, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"] }).toString();

function listFiles(dir: string, base = dir): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? listFiles(full, base) : [path.relative(base, full)];
  });
}

const problems: string[] = [];
try {
  run(["lint", "proto"]);
} catch {
  problems.push("buf lint proto failed (see above)");
}
try {
  run(["format", "proto", "--diff", "--exit-code"]);
} catch (err) {
  problems.push(
    `proto files are not formatted (run \`npx buf format -w proto\`):\n${(err as { stdout?: Buffer }).stdout ?? ""}`,
  );
}

const out = fs.mkdtempSync(path.join(os.tmpdir(), "gen-check-"));
try {
  run(["generate", "--output", out]);
  const fresh = path.join(out, "gen");
  const committed = path.join(root, "gen");
  const a = new Set(listFiles(fresh));
  const b = new Set(listFiles(committed));
  for (const f of a) if (!b.has(f)) problems.push(`gen/${f} is missing`);
  for (const f of b) if (!a.has(f)) problems.push(`gen/${f} is not generated from proto/ any more`);
  for (const f of a) {
    if (b.has(f) && !fs.readFileSync(path.join(fresh, f)).equals(fs.readFileSync(path.join(committed, f)))) {
      problems.push(`gen/${f} differs from buf generate output`);
    }
  }
} finally {
  fs.rmSync(out, { recursive: true, force: true });
}

if (problems.length) {
  process.stderr.write(`${problems.join("\n")}\n\nRun \`npm run generate\` and commit gen/.\n`);
  process.exit(1);
}
process.stdout.write("gen/ is up to date with proto/\n");
