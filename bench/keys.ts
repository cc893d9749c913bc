// Benchmark of GET /partner/v1/keys (issue: foundation). Not a test: run with `npm run bench:keys`.
// Loads the real service (REST face, valid key, limits raised) and a bare node:http server that returns the
// same bytes, with the same connections, and compares them. Bar: >= 30 % of the bare server's throughput,
// p99 <= 15 ms at 50 connections.
import { load, partnerWithKey, report, startBareServer, startService } from "./support.ts";

const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);

const service = await startService();
try {
  const { key } = await partnerWithKey(service);
  const url = `${service.partnerUrl}/partner/v1/keys`;
  const sample = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  if (sample.status !== 200) throw new Error(`keys endpoint answered ${sample.status}`);
  const body = await sample.text();

  // The bare server: node:http, in its own process like the service, answering the same bytes.
  const bare = await startBareServer(body, {
    "content-type": "application/json; charset=utf-8",
    "cache-control": "public, max-age=14400",
  });
  try {
    const headers = { authorization: `Bearer ${key}` };
    const ours = await load(url, { connections, seconds, headers });
    const baseline = await load(`${bare.url}/partner/v1/keys`, {
      connections,
      seconds,
      headers,
    });
    const ratio = ours.requestsPerSecond / baseline.requestsPerSecond;
    report({
      bench: "keys",
      target: "service REST GET /partner/v1/keys",
      connections,
      ...ours,
      peakRssMb: await service.peakRssMb(),
    });
    report({ bench: "keys", target: "bare node:http, same bytes", connections, ...baseline });
    report({
      bench: "keys",
      figure: "throughput ratio",
      value: Number(ratio.toFixed(3)),
      bar: ">= 0.30",
      meets: ratio >= 0.3,
    });
    report({
      bench: "keys",
      figure: "p99 latency ms",
      value: ours.p99Ms,
      bar: "<= 15",
      meets: ours.p99Ms <= 15,
    });
  } finally {
    bare.stop();
  }
} finally {
  await service.stop();
}
