// Benchmark of the request log's cost (issue: the portal's request log). Not a test: `npm run bench:requestlog`.
// One embedded PostgreSQL, a partner's sandbox ledgers for BENCH_USERS users (2,000: BENCH_HEAVY traders with
// 5,000 entries each, the rest 50) and full-scope consents for BENCH_READ_USERS readers (1,000). Two api processes
// on it, side by side: one logging every call (the default), one with REQUEST_LOG=false. Rounds alternate between
// them (BENCH_ROUNDS pairs, BENCH_SECONDS each) at saturation: snapshot reads on 50 connections, every one of them
// a logged call. Each round reports the reads a second; the logging process's metrics say how many calls were
// written and how many dropped. Bar: with the log on, saturation >= 0.95 x with it off, and no call dropped.
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startEmbeddedPostgres } from "../src/platform/db/embedded.ts";
import { createLogger } from "../src/platform/logger.ts";
import {
  type BenchService,
  grantReaders,
  partnerWithKey,
  report,
  seedTraders,
  snapshotRound,
  startService,
} from "./support.ts";

const USERS = Number(process.env.BENCH_USERS ?? 2_000);
const HEAVY = Number(process.env.BENCH_HEAVY ?? 20);
const HEAVY_ENTRIES = Number(process.env.BENCH_HEAVY_ENTRIES ?? 5_000);
const LIGHT_ENTRIES = Number(process.env.BENCH_LIGHT_ENTRIES ?? 50);
const READ_USERS = Number(process.env.BENCH_READ_USERS ?? 1_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
const env = {
  DATABASE_URL: db.url,
  MASTER_KEY: randomBytes(32).toString("hex"),
  INTERNAL_TOKEN: `itk_${randomBytes(24).toString("base64url")}`,
  ROLE: "api",
  DB_POOL_SIZE: "5",
};
// The data is loaded through a process of its own, stopped before the two measured ones start: neither of them
// carries the load's heap or warm-up into the rounds.
const loader = await startService(env);
let logging: BenchService | undefined;
let silent: BenchService | undefined;

/** A counter's value on the process's /metrics. */
const metric = async (s: BenchService, sample: string) => {
  const text = await (
    await fetch(`${s.internalUrl}/metrics`, { headers: { authorization: `Bearer ${s.internalToken}` } })
  ).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith(sample))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
};

try {
  const { partnerId, key } = await partnerWithKey(loader);
  const userId = await seedTraders(loader, {
    prefix: "log",
    phonePrefix: "2",
    users: USERS,
    heavy: HEAVY,
    heavyEntries: HEAVY_ENTRIES,
    lightEntries: LIGHT_ENTRIES,
  });
  const readers = Array.from({ length: Math.min(USERS, HEAVY + READ_USERS) }, (_, i) => i);
  await grantReaders(loader, partnerId, userId, readers);
  const admin = await import("pg").then((m) => new m.default.Client({ connectionString: db.adminUrl }));
  await admin.connect();
  await admin.query("vacuum (analyze)");
  await admin.query("checkpoint");
  await admin.end();
  await loader.stop();
  logging = await startService(env);
  silent = await startService({ ...env, REQUEST_LOG: "false" });

  const round = (s: BenchService, seconds: number) => snapshotRound(s, key, userId, readers, seconds);
  // Warm-up: every reader read once through each process.
  const [on, off] = [logging, silent];
  for (const s of [on, off]) await round(s, 5);
  const totals = { on: 0, off: 0 };
  const reads = { on: 0, off: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, s] of [
      ["on", on],
      ["off", off],
    ] as const) {
      const result = await round(s, SECONDS);
      totals[name] += result.requests.average / ROUNDS;
      reads[name] += result.requests.total;
      report({
        bench: "requestlog",
        figure: `round ${r + 1}: snapshot reads at saturation (50 connections), request log ${name}`,
        requestsPerSecond: Math.round(result.requests.average),
        p50Ms: result.latency.p50,
        p99Ms: result.latency.p99,
        non2xx: result.non2xx,
      });
    }
  }
  // What the logging process wrote, once its last batch is in.
  await new Promise((r) => setTimeout(r, 2_000));
  const written = await metric(on, "request_log_written_total");
  const dropped = await metric(on, "request_log_dropped_total");
  const ratio = totals.on / totals.off;
  report({
    bench: "requestlog",
    figure: "snapshot saturation with the request log on, against off (same run, alternating rounds)",
    on: Math.round(totals.on),
    off: Math.round(totals.off),
    ratio: Number(ratio.toFixed(3)),
    callsWritten: written,
    callsDropped: dropped,
    bar: "ratio >= 0.95, no call dropped",
    meets: ratio >= 0.95 && dropped === 0,
  });
} finally {
  await logging?.stop();
  await silent?.stop();
  if (loader.child.exitCode === null) await loader.stop();
  await db.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
