// `npm run bench` / `npm run bench:all`: runs every benchmark in turn (each prints JSON lines with its figures
// and bars), then prints one table of every figure against its bar. Exits 1 if a benchmark failed or a bar
// was missed.
import { spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { printTable } from "./support.ts";

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
  { name: "replicas", file: "replicas" },
  { name: "requestlog", file: "request-log" },
  { name: "tracing", file: "tracing" },
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

printTable(rows);
failed ||= rows.some((r) => r.meets === false);
process.exit(failed ? 1 : 0);
