// Checks proto/ against a base commit for wire and JSON breaking changes (buf breaking, WIRE_JSON).
// `buf breaking --against .git#ref` cannot see the google/api files in node_modules, so the base is built
// into an image from its own proto/ with today's node_modules, and compared against that.
// Usage: npm run check:breaking [-- <base-ref>]   (default: the previous commit)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const base = process.argv[2] ?? "HEAD~1";
const git = (args: string[]) => execFileSync("git", args, { cwd: root }).toString().trim();

try {
  git(["rev-parse", "--verify", `${base}^{commit}`]);
} catch {
  process.stdout.write(`no base commit ${base}; nothing to compare\n`);
  process.exit(0);
}
if (!git(["ls-tree", "-d", "--name-only", base, "proto"])) {
  process.stdout.write(`${base} has no proto/; nothing to compare\n`);
  process.exit(0);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "breaking-"));
try {
  const archive = execFileSync("git", ["archive", base, "proto", "buf.yaml"], { cwd: root });
  execFileSync("tar", ["-x", "-C", tmp], { input: archive });
  fs.symlinkSync(path.join(root, "node_modules"), path.join(tmp, "node_modules"));
  const image = path.join(tmp, "base.binpb");
  const buf = path.join(root, "node_modules/.bin/buf");
  execFileSync(buf, ["build", "proto", "-o", image], { cwd: tmp, stdio: "inherit" });
  execFileSync(buf, ["breaking", "proto", "--against", image], { cwd: root, stdio: "inherit" });
  process.stdout.write(`no breaking changes against ${base}\n`);
} catch {
  process.stderr.write(`breaking changes against ${base} (see above)\n`);
  process.exitCode = 1;
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
