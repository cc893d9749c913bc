// Benchmark of tracing's cost (docs/operations.md "Traces"). Not a test: `npm run bench:tracing`.
// One embedded PostgreSQL with a partner's sandbox ledgers (as bench:requestlog: BENCH_USERS users, BENCH_HEAVY
// of them heavy, full-scope consents for BENCH_READ_USERS readers). Three api processes on it, side by side:
// the service as it was before tracing (BENCH_BASELINE, a commit checked out into a temporary worktree), the
// service with tracing off, and with it on (OTLP/HTTP to a collector here that takes and discards every export,
// keeping one trace in ten: parentbased_traceidratio 0.1). Rounds go round the three (BENCH_ROUNDS, BENCH_SECONDS
// each, each round starting with the next of them) at saturation: snapshot reads on 50 connections. Bars: on >= 0.9 x off, and off >= 0.98 x the baseline.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { startEmbeddedPostgres } from "../src/platform/db/embedded.ts";
import { createLogger } from "../src/platform/logger.ts";
import {
  type BenchService,
  grantReaders,
  partnerWithKey,
  report,
  root,
  seedTraders,
  snapshotRound,
  startService,
} from "./support.ts";

const USERS = Number(process.env.BENCH_USERS ?? 2_000);
const HEAVY = Number(process.env.BENCH_HEAVY ?? 20);
const READ_USERS = Number(process.env.BENCH_READ_USERS ?? 1_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
/** The commit before tracing came in. */
const BASELINE = process.env.BENCH_BASELINE ?? "7ffece2~1";

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
// The baseline's sources, run with this checkout's installed packages.
const baseline = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-baseline-"));
execFileSync("git", ["worktree", "add", "--detach", baseline, BASELINE], { cwd: root, stdio: "ignore" });
await fs.symlink(path.join(root, "node_modules"), path.join(baseline, "node_modules"));
// A collector that takes every export and keeps nothing.
let exports = 0;
const collector = http.createServer((req, res) => {
  req.resume().on("end", () => {
    exports++;
    res.writeHead(200).end();
  });
});
await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r));
const env = {
  DATABASE_URL: db.url,
  MASTER_KEY: randomBytes(32).toString("hex"),
  INTERNAL_TOKEN: `itk_${randomBytes(24).toString("base64url")}`,
  ROLE: "api",
  DB_POOL_SIZE: "5",
  // The request log's writes are the same in all three: off, so only tracing differs.
  REQUEST_LOG: "false",
};
const traced = {
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
  OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
  OTEL_TRACES_SAMPLER_ARG: "0.1",
};
const loader = await startService(env);
const services: Partial<Record<"baseline" | "off" | "on", BenchService>> = {};

try {
  const { partnerId, key } = await partnerWithKey(loader);
  const userId = await seedTraders(loader, {
    prefix: "trc",
    phonePrefix: "3",
    users: USERS,
    heavy: HEAVY,
    heavyEntries: 5_000,
    lightEntries: 50,
  });
  const readers = Array.from({ length: Math.min(USERS, HEAVY + READ_USERS) }, (_, i) => i);
  await grantReaders(loader, partnerId, userId, readers);
  const admin = await import("pg").then((m) => new m.default.Client({ connectionString: db.adminUrl }));
  await admin.connect();
  await admin.query("vacuum (analyze)");
  await admin.query("checkpoint");
  await admin.end();
  await loader.stop();
  services.baseline = await startService(env, baseline);
  services.off = await startService(env);
  services.on = await startService({ ...env, ...traced });

  const round = (s: BenchService, seconds: number) => snapshotRound(s, key, userId, readers, seconds);
  const names = ["baseline", "off", "on"] as const;
  for (const name of names) await round(services[name] as BenchService, 5);
  const totals = { baseline: 0, off: 0, on: 0 };
  // Each round starts with the next of the three, so none is always measured first (or last) in a round.
  for (let r = 0; r < ROUNDS; r++)
    for (const name of [...names.slice(r % 3), ...names.slice(0, r % 3)]) {
      const result = await round(services[name] as BenchService, SECONDS);
      totals[name] += result.requests.average / ROUNDS;
      report({
        bench: "tracing",
        figure: `round ${r + 1}: snapshot reads at saturation (50 connections), ${name}`,
        requestsPerSecond: Math.round(result.requests.average),
        p50Ms: result.latency.p50,
        p99Ms: result.latency.p99,
        non2xx: result.non2xx,
      });
    }
  const onOff = totals.on / totals.off;
  const offBaseline = totals.off / totals.baseline;
  report({
    bench: "tracing",
    figure:
      "snapshot saturation: tracing on (10 % sampled) against off, and off against the code before tracing",
    baseline: Math.round(totals.baseline),
    off: Math.round(totals.off),
    on: Math.round(totals.on),
    onOverOff: Number(onOff.toFixed(3)),
    offOverBaseline: Number(offBaseline.toFixed(3)),
    exportsReceived: exports,
    bar: "on >= 0.9 x off; off >= 0.98 x baseline",
    meets: onOff >= 0.9 && offBaseline >= 0.98 && exports > 0,
  });
} finally {
  for (const s of Object.values(services)) await s?.stop();
  if (loader.child.exitCode === null) await loader.stop();
  await db.stop();
  collector.close();
  execFileSync("git", ["worktree", "remove", "--force", baseline], { cwd: root, stdio: "ignore" });
  await fs.rm(dataDir, { recursive: true, force: true });
}
