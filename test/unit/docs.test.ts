import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const pages = [
  "README.md",
  "test/README.md",
  ...readdirSync(path.join(root, "docs")).map((f) => `docs/${f}`),
];

describe("the documentation", () => {
  it("has a page per concept, each linked from the docs index", () => {
    const index = readFileSync(path.join(root, "docs/README.md"), "utf8");
    for (const page of [
      "environments.md",
      "consent.md",
      "snapshots.md",
      "webhooks.md",
      "idempotency-and-errors.md",
      "rate-limits.md",
    ]) {
      expect(existsSync(path.join(root, "docs", page)), page).toBe(true);
      expect(index).toContain(`(${page})`);
    }
  });

  it("links only to files that exist", () => {
    for (const page of pages) {
      const text = readFileSync(path.join(root, page), "utf8");
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (!target || /^[a-z]+:/.test(target)) continue;
        expect(
          existsSync(path.resolve(path.dirname(path.join(root, page)), target)),
          `${page} → ${target}`,
        ).toBe(true);
      }
    }
  });
});
