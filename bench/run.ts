// `npm run bench` / `npm run bench:all`: runs every benchmark in turn (each prints JSON lines with its figures
// and bars), then prints one table of every figure against its bar. Exits 1 if a benchmark failed or a bar
// was missed.
import { spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";

// Each benchmark, and the scale-out runs: the webhook and retry ones with a second worker process on the same
// database, the snapshot one with a second api process.
const benches: { name: string; file: string; env?: Record<string, string> }[] = [
  { name: "keys", file: "keys" },
  { name: "webhooks", file: "webhooks" },
  { name: "fairness", file: "fairness" },
  { name: "retries", file: "retries" },
  { name: "snapshot", file: "snapshot" },
  { name: "disbursements", file: "disbursements" },
  { name: "isolation", file: "isolation" },
  { name: "portal", file: "portal" },
  { name: "scaleout", file: "scaleout" },
  { name: "scaleout webhooks", file: "webhooks", env: { BENCH_INSTANCES: "2" } },
  { name: "scaleout retries", file: "retries", env: { BENCH_INSTANCES: "2" } },
  { name: "scaleout snapshots", file: "snapshot", env: { BENCH_INSTANCES: "2" } },
];
const rows: Record<string, unknown>[] = [];
let failed = false;

for (const { name, file, env } of benches) {
  const child = spawn(process.execPath, [path.join(import.meta.dirname, `${file}.ts`)], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env },
  });
  createInterface({ input: child.stdout }).on("line", (line) => {
    process.stdout.write(`${line}\n`);
    try {
      const row = JSON.parse(line) as Record<string, unknown>;
      if (row.bar !== undefined) rows.push(row);
    } catch {
      // not a figure
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  if (code !== 0) {
    failed = true;
    rows.push({ bench: name, figure: `exited with ${code}`, bar: "runs", meets: false });
  }
}

const META = new Set(["bench", "figure", "bar", "meets"]);
const result = (row: Record<string, unknown>) =>
  Object.entries(row)
    .filter(([k, v]) => !META.has(k) && (typeof v === "number" || typeof v === "string"))
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
const table = rows.map((r) => [
  String(r.bench ?? ""),
  String(r.figure ?? ""),
  result(r),
  String(r.bar),
  r.meets ? "yes" : "NO",
]);
const header = ["bench", "figure", "result", "bar", "meets"];
const widths = header.map((h, i) =>
  Math.min(70, Math.max(h.length, ...table.map((r) => (r[i] ?? "").length))),
);
const line = (cells: string[]) =>
  cells.map((c, i) => c.slice(0, widths[i]).padEnd(widths[i] ?? 0)).join(" | ");
console.log(`\n${line(header)}\n${widths.map((w) => "-".repeat(w)).join("-|-")}`);
for (const r of table) console.log(line(r));
failed ||= rows.some((r) => r.meets === false);
process.exit(failed ? 1 : 0);
