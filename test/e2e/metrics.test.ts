import { register } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, rest } from "../support/clients.ts";
import { openPage, submit } from "../support/consent-page.ts";
import { sample } from "../support/metrics.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let p: PartnerFixture;
let receiver: TestReceiver;

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 5, refillPerSecond: 0.01 },
      },
    },
  });
  p = await createPartner(t);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const scrape = async (token = t.internalToken) =>
  fetch(`${t.internalUrl}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

/**
 * Every family the service exports, with its type and label names: dashboards and alerts are built on these, so
 * a change here is a change for operators (docs/operations.md lists them). Histograms' `_bucket` samples add `le`.
 */
const FAMILIES: Record<string, { type: string; labels: string[] }> = {
  http_requests_total: { type: "counter", labels: ["listener", "face", "route", "method", "status"] },
  http_request_duration_seconds: { type: "histogram", labels: ["listener", "face", "route"] },
  snapshot_read_duration_seconds: { type: "histogram", labels: ["face"] },
  http_connections_open: { type: "gauge", labels: ["listener"] },
  http_connections_refused_total: { type: "counter", labels: ["listener", "reason"] },
  http_connections_evicted_total: { type: "counter", labels: ["listener"] },
  rate_limit_rejections_total: { type: "counter", labels: ["class"] },
  expensive_limit_rejections_total: { type: "counter", labels: ["limit"] },
  request_log_written_total: { type: "counter", labels: [] },
  request_log_dropped_total: { type: "counter", labels: ["reason"] },
  webhook_delivery_attempts_total: { type: "counter", labels: ["outcome"] },
  webhook_delivery_attempt_duration_seconds: { type: "histogram", labels: ["outcome"] },
  webhook_event_to_first_attempt_seconds: { type: "histogram", labels: [] },
  webhook_delivery_attempt_lateness_seconds: { type: "histogram", labels: [] },
  webhook_deliveries_deferred_total: { type: "counter", labels: ["reason"] },
  payouts_total: { type: "counter", labels: ["environment", "outcome"] },
  debits_total: { type: "counter", labels: ["environment", "outcome"] },
  retention_purged_rows_total: { type: "counter", labels: ["table"] },
  retention_dropped_partitions_total: { type: "counter", labels: ["table"] },
  network_calls_in_transaction_total: { type: "counter", labels: ["kind"] },
  db_reads_total: { type: "counter", labels: ["target", "reason"] },
  webhook_deliveries_due: { type: "gauge", labels: ["environment"] },
  webhook_deliveries_oldest_due_seconds: { type: "gauge", labels: [] },
  job_queue_depth: { type: "gauge", labels: ["queue"] },
  job_queue_oldest_seconds: { type: "gauge", labels: ["queue"] },
  payouts_in_flight: { type: "gauge", labels: ["environment", "status"] },
  debits_due: { type: "gauge", labels: ["environment"] },
  db_pool_connections: { type: "gauge", labels: ["pool", "state"] },
  db_pool_waiting: { type: "gauge", labels: ["pool"] },
  signing_key_active_remaining_seconds: { type: "gauge", labels: ["environment"] },
  signing_keys_incoming: { type: "gauge", labels: ["environment"] },
  metrics_families_unavailable: { type: "gauge", labels: [] },
};
/** Every histogram's bucket bounds, in seconds (`le`), then `+Inf`. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.28, 0.5, 1, 2.5, 5, 10, 30].map(
  String,
);
/** The families the request, delivery and payout above leave samples in, whatever else is going on. */
const FILLED = [
  "http_requests_total",
  "http_request_duration_seconds",
  "http_connections_open",
  "rate_limit_rejections_total",
  "webhook_delivery_attempts_total",
  "webhook_delivery_attempt_duration_seconds",
  "webhook_event_to_first_attempt_seconds",
  "payouts_total",
  "retention_purged_rows_total",
  "webhook_deliveries_oldest_due_seconds",
  "db_pool_connections",
  "db_pool_waiting",
  "signing_key_active_remaining_seconds",
  "signing_keys_incoming",
  "metrics_families_unavailable",
];

/** One sample line, parsed: its name, its labels, and its family (a histogram's without `_bucket`, `_sum`, `_count`). */
const parseSample = (line: string) => {
  const brace = line.indexOf("{");
  const name = brace === -1 ? line.slice(0, line.indexOf(" ")) : line.slice(0, brace);
  const labels =
    brace === -1
      ? []
      : [...line.slice(brace, line.lastIndexOf("}") + 1).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(
          ([, k, v]) => [k as string, v as string] as const,
        );
  const family =
    /_(bucket|sum|count)$/.test(name) && !(name in FAMILIES) ? name.replace(/_[a-z]+$/, "") : name;
  return { name, labels, family };
};

describe("/metrics", () => {
  it("needs the service token", async () => {
    expect((await scrape("")).status).toBe(401);
    expect((await scrape("wrong-token-wrong-token-wrong")).status).toBe(401);
    const ok = await scrape();
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it("counts requests per route template and face, rate-limit rejections, deliveries, payouts and queues", async () => {
    const hook = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body: { url: receiver.url, events: ["*"] },
    });
    await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.body.id}`, { key: p.sandboxKey });
    await connectClient(KeysService, t.partnerUrl, `Bearer ${p.sandboxKey}`).listKeys({});
    await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${hook.body.id}/test`, {
      key: p.sandboxKey,
      body: {},
    });
    await eventually(() => receiver.received.length > 0);
    await t.internal.consents.grantConsent({
      userId: "usr_sandboxTrusted",
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const dsb = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      headers: { "idempotency-key": "metrics-1" },
      body: {
        userId: "usr_sandboxTrusted",
        principalKobo: "100000",
        destination: "WALLET",
        reference: "metrics-1",
        repaymentSchedule: {
          installments: [
            {
              dueDate: new Date(Date.now() + 9 * 86_400_000).toISOString().slice(0, 10),
              amountKobo: "110000",
            },
          ],
        },
        scheduleAcceptedAt: new Date().toISOString(),
      },
    });
    expect(dsb.status).toBe(200);
    // The write bucket (5) is now spent: the next write is refused.
    let refused = 0;
    for (let i = 0; i < 3; i++) {
      const r = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
        key: p.sandboxKey,
        body: { url: receiver.url, events: ["*"] },
      });
      if (r.status === 429) refused++;
    }
    expect(refused).toBeGreaterThan(0);
    // The person accepts on the mandate page (a page, not a partner write: no bucket is spent).
    const page = await openPage(dsb.body.acceptanceUrl);
    expect((await submit(dsb.body.acceptanceUrl, page, "accept")).status).toBe(200);

    const text = await eventually(async () => {
      const body = await (await scrape()).text();
      return sample(body, "payouts_total", { environment: "sandbox", outcome: "delivered" }) >= 1 &&
        sample(body, "webhook_delivery_attempts_total", { outcome: "delivered" }) >= 1
        ? body
        : undefined;
    });
    expect(
      sample(text, "http_requests_total", {
        face: "rest",
        route: "/partner/v1/webhooks/{id}",
        method: "GET",
        status: "200",
      }),
    ).toBe(1);
    expect(text).not.toContain(hook.body.id); // never an id in a label
    expect(
      sample(text, "http_requests_total", { face: "connect", route: "/partner.v1.KeysService/ListKeys" }),
    ).toBe(1);
    expect(sample(text, "http_request_duration_seconds_count", { route: "/partner/v1/webhooks/{id}" })).toBe(
      1,
    );
    expect(sample(text, "rate_limit_rejections_total", { class: "write" })).toBe(refused);
    expect(sample(text, "webhook_event_to_first_attempt_seconds_count", {})).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^# TYPE job_queue_depth gauge$/m);
    expect(text).toMatch(/^# TYPE webhook_deliveries_oldest_due_seconds gauge$/m);
    expect(text).toMatch(/^# TYPE payouts_in_flight gauge$/m);
    expect(text).toMatch(/^# TYPE debits_due gauge$/m);
  });

  it("exports the same families, types, label names and buckets as always", async () => {
    const text = await (await scrape()).text();
    const types = Object.fromEntries(
      [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [name as string, type as string]),
    );
    // Process and Node.js metrics (`process_*`, `nodejs_*`) are not the service's own: left out here.
    const ours = Object.entries(types).filter(([name]) => !/^(process|nodejs)_/.test(name));
    expect(Object.fromEntries(ours)).toEqual(
      Object.fromEntries(Object.entries(FAMILIES).map(([name, f]) => [name, f.type])),
    );
    const filled = new Set<string>();
    const bounds = new Map<string, string[]>();
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const { name, labels, family } = parseSample(line);
      const expected = FAMILIES[family];
      if (!expected) continue;
      filled.add(family);
      // The order labels are written in means nothing to Prometheus: their names do.
      const names = labels.map(([k]) => k).sort();
      const bucket = name.endsWith("_bucket");
      expect(names, line).toEqual([...expected.labels, ...(bucket ? ["le"] : [])].sort());
      if (bucket) {
        const series = `${family}${JSON.stringify(labels.filter(([k]) => k !== "le").sort())}`;
        const le = labels.find(([k]) => k === "le")?.[1] ?? "";
        bounds.set(series, [...(bounds.get(series) ?? []), le]);
      }
    }
    expect([...filled]).toEqual(expect.arrayContaining(FILLED));
    expect(bounds.size).toBeGreaterThan(0);
    for (const [series, le] of bounds) expect(le, series).toEqual([...BUCKETS, "+Inf"]);
  });

  it("says how full each database pool of the process is: connections in use and idle, and work waiting", async () => {
    const pool = (text: string) => ({
      inUse: sample(text, "db_pool_connections", { pool: "partner-api", state: "in_use" }),
      idle: sample(text, "db_pool_connections", { pool: "partner-api", state: "idle" }),
      waiting: sample(text, "db_pool_waiting", { pool: "partner-api" }),
    });
    const first = await (await scrape()).text();
    const quiet = pool(first);
    expect(quiet.inUse + quiet.idle).toBeGreaterThan(0);
    // The job queue's own pool (pg-boss's) is counted too: a worker waiting on it waits like any other.
    const jobs = (state: string) => sample(first, "db_pool_connections", { pool: "partner-api jobs", state });
    expect(jobs("in_use") + jobs("idle")).toBeGreaterThan(0);
    // More units of work than the pool has connections (5 in tests): some run, the rest wait.
    const held = Array.from({ length: 8 }, () => sql(t.app.orm.em.fork(), "select pg_sleep(2)", []));
    const busy = await eventually(
      async () => {
        const now = pool(await (await scrape()).text());
        return now.waiting > 0 && now;
      },
      { what: "work waiting for a connection" },
    );
    expect(busy.inUse).toBeGreaterThanOrEqual(5);
    await Promise.all(held);
    expect(pool(await (await scrape()).text()).waiting).toBe(0);
  });

  it("says how long the signing key that signs now has left, and whether its successor is published", async () => {
    const text = await (await scrape()).text();
    for (const environment of ["sandbox", "production"]) {
      const left = sample(text, "signing_key_active_remaining_seconds", { environment });
      // A key signs for one calendar quarter: what is left of this one.
      expect(left, environment).toBeGreaterThan(0);
      expect(left, environment).toBeLessThanOrEqual(92 * 86_400);
      expect(sample(text, "signing_keys_incoming", { environment })).toBeGreaterThanOrEqual(0);
    }
  });

  it("adds prom-client's process and Node.js metrics, in the service's own registry", async () => {
    const text = await (await scrape()).text();
    for (const [name, type] of [
      ["process_cpu_user_seconds_total", "counter"],
      ["process_cpu_system_seconds_total", "counter"],
      ["process_resident_memory_bytes", "gauge"],
      ["process_open_fds", "gauge"],
      ["process_start_time_seconds", "gauge"],
      ["nodejs_eventloop_lag_seconds", "gauge"],
      ["nodejs_eventloop_lag_p99_seconds", "gauge"],
      ["nodejs_gc_duration_seconds", "histogram"],
      ["nodejs_heap_size_used_bytes", "gauge"],
      ["nodejs_active_handles_total", "gauge"],
    ]) {
      expect(text).toMatch(new RegExp(`^# TYPE ${name} ${type}$`, "m"));
    }
    expect(sample(text, "process_cpu_user_seconds_total", {})).toBeGreaterThan(0);
    expect(sample(text, "process_resident_memory_bytes", {})).toBeGreaterThan(0);
    const families = [...text.matchAll(/^# TYPE (\S+) /gm)].map(([, name]) => name);
    expect(families.length).toBe(new Set(families).size);
    // prom-client's global registry, which any library in the process may fill, is left alone.
    expect(register.getMetricsAsArray()).toEqual([]);
  });
});
