import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

// Code generators for other languages (Go, Java, C#, PHP, Ruby, Objective-C, Swift) need their options in
// every file of the contract, the same within a package.
const root = path.resolve(import.meta.dirname, "../../proto");
const files = ["partner/v1", "internal/v1"].flatMap((dir) =>
  readdirSync(path.join(root, dir))
    .filter((f) => f.endsWith(".proto"))
    .map((f) => path.join(dir, f)),
);
const OPTIONS = [
  "csharp_namespace",
  "go_package",
  "java_multiple_files",
  "java_outer_classname",
  "java_package",
  "objc_class_prefix",
  "php_namespace",
  "ruby_package",
  "swift_prefix",
];

describe("every proto file", () => {
  it("sets the language options, the same across its package (but the outer class name)", () => {
    expect(files.length).toBeGreaterThan(10);
    const byPackage = new Map<string, string>();
    for (const file of files) {
      const text = readFileSync(path.join(root, file), "utf8");
      const values = OPTIONS.map((name) => {
        const m = text.match(new RegExp(`^option ${name} = (.+);$`, "m"));
        expect(m, `${file}: option ${name}`).not.toBeNull();
        return name === "java_outer_classname" ? "" : (m?.[1] ?? "");
      }).join("|");
      const pkg = path.dirname(file);
      expect(byPackage.get(pkg) ?? values, file).toBe(values);
      byPackage.set(pkg, values);
    }
  });
});
