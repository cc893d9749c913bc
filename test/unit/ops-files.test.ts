import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

// The alert rules and the dashboard are built on the metrics the service exports: every metric they name is
// one docs/operations.md lists (its "Metrics" section names each family the service exports), and every alert
// has its runbook section there. promtool checks the rules' syntax and behaviour (`npm run check:alerts`).
const root = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(root, file), "utf8");
const operations = read("docs/operations.md");
const alerts = read("ops/prometheus/alerts.yml");
const dashboard = JSON.parse(read("ops/grafana/partner-api.json")) as {
  panels: { title: string; targets: { expr: string }[] }[];
};

/** The metric names in a PromQL expression: names followed by `{`, `[` or standing alone, less PromQL's own words. */
function metricNames(expr: string): string[] {
  const words = new Set(["sum", "max", "min", "by", "on", "and", "or", "rate", "histogram_quantile", "le"]);
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\{[^}]*\}/g, "{}");
  return [...withoutStrings.matchAll(/\b([a-z_][a-z0-9_]*)\b(?!\s*\()/g)]
    .map(([, name]) => name as string)
    .filter((name) => !words.has(name) && /_/.test(name))
    .map((name) => name.replace(/_(bucket|sum|count)$/, ""));
}

const documented = (name: string) => operations.includes(`\`${name}`);

describe("the alert rules and the dashboard", () => {
  it("name only metrics the service exports and the operations guide lists", () => {
    const exprs = [
      ...[...alerts.matchAll(/expr: (\|\n((?: {10}.*\n)+)|.*)/g)].map(([, one, block]) => block ?? one ?? ""),
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ];
    expect(exprs.length).toBeGreaterThan(20);
    const names = new Set(exprs.flatMap(metricNames));
    expect(names.size).toBeGreaterThan(10);
    expect([...names].filter((n) => !documented(n))).toEqual([]);
  });

  it("give every alert a runbook section in docs/operations.md", () => {
    const runbooks = [...alerts.matchAll(/runbook: "docs\/operations\.md#([a-z0-9-]+)"/g)].map(([, a]) => a);
    expect(runbooks.length).toBe([...alerts.matchAll(/- alert: /g)].length);
    const anchors = new Set(
      [...operations.matchAll(/^#+ (.+)$/gm)].map(([, h]) =>
        (h as string)
          .toLowerCase()
          .replace(/[^a-z0-9 -]/g, "")
          .replace(/ /g, "-"),
      ),
    );
    expect(runbooks.filter((r) => !anchors.has(r as string))).toEqual([]);
  });
});
