/**
 * Prometheus metrics, kept by prom-client in a registry of the service's own (never prom-client's global one,
 * which any library in the process could write to, and which two services in one process would share):
 * counters and histograms per process, gauges read when scraped, and prom-client's default process and
 * Node.js metrics. Label values are bounded by the callers (route templates, never raw URLs or ids).
 */
import { collectDefaultMetrics, Gauge, Histogram, Counter as PromCounter, Registry } from "prom-client";
import {
  Counter,
  latencyBuckets,
  outcomeCounters,
  refusalCounters,
  requestLogCounters,
  snapshotMetrics,
  webhookMetrics,
} from "./metrics-families.ts";
import { renderer } from "./metrics-render.ts";

export { Counter, latencyBuckets };

type RequestLabel = "listener" | "face" | "route" | "method" | "status";
type LatencyLabel = "listener" | "face" | "route";
/** One listener, face and route's series: its latency histogram, and its counts by method and status. */
interface RouteSeries {
  labels: Record<LatencyLabel, string>;
  /** Observations per bucket (not cumulative), the last for those past every bucket (`+Inf`). */
  buckets: Float64Array;
  sum: number;
  count: number;
  /** By `status * METHOD_LABELS.length + method`'s index in {@link METHOD_LABELS} (status 0: `other`). */
  counts: Map<number, { labels: Record<RequestLabel, string>; value: number }>;
}

/** A sample as prom-client's registry prints it. */
interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** The `method` label's values: the standard methods, then `other` for anything else a client sends. */
const METHOD_LABELS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"] as const;
const METHOD_INDEX = new Map<string, number>(METHOD_LABELS.map((m, i) => [m, i]));
const OTHER_METHOD = METHOD_LABELS.length - 1;

/**
 * Requests: a count per listener, face, route, method and status, and a latency histogram per listener,
 * face and route. Recorded on every request, so they are kept by hand here and handed to prom-client's
 * registry when scraped: prom-client hashes the labels of every update, which cost 8 % of the throughput of a
 * request answered from caches (bench:keys, 10,400 against 9,400 a second). The families, names, help and
 * buckets are prom-client's as before; only the counting is ours.
 */
export class HttpMetrics {
  readonly #series = new Map<string, Map<string, Map<string, RouteSeries>>>();
  readonly #buckets: readonly number[];
  constructor(registry: Registry, buckets: readonly number[]) {
    this.#buckets = buckets;
    const all = () =>
      [...this.#series.values()].flatMap((f) => [...f.values()].flatMap((r) => [...r.values()]));
    new ScrapedCounter(
      registry,
      "http_requests_total",
      "Requests answered, by listener, face, route, method and status.",
      () => all().flatMap((s) => [...s.counts.values()].map((c) => ({ labels: c.labels, value: c.value }))),
    );
    new ScrapedHistogram(
      registry,
      "http_request_duration_seconds",
      "Time from the request's arrival to the end of its response, by listener, face and route.",
      buckets,
      () => all().flatMap((s) => histogramSamples("http_request_duration_seconds", buckets, s)),
    );
  }
  record(
    listener: string,
    face: string,
    route: string,
    method: string,
    status: number,
    seconds: number,
  ): void {
    // Labels come from fixed sets only: a method outside the standard ones is `other`, a status outside
    // 100–599 is `other`, whatever a client sends (routes and faces are bounded by their callers).
    const methodIndex = METHOD_INDEX.get(method) ?? OTHER_METHOD;
    const statusCode = status >= 100 && status <= 599 ? status : 0;
    const series = this.#routeSeries(listener, face, route);
    const countKey = statusCode * METHOD_LABELS.length + methodIndex;
    let count = series.counts.get(countKey);
    if (!count) {
      const labels = {
        ...series.labels,
        method: METHOD_LABELS[methodIndex] ?? "other",
        status: statusCode ? String(statusCode) : "other",
      };
      count = { labels, value: 0 };
      series.counts.set(countKey, count);
    }
    count.value++;
    let bucket = 0;
    while (bucket < this.#buckets.length && seconds > (this.#buckets[bucket] ?? 0)) bucket++;
    series.buckets[bucket] = (series.buckets[bucket] ?? 0) + 1;
    series.sum += seconds;
    series.count++;
  }
  #routeSeries(listener: string, face: string, route: string): RouteSeries {
    let byFace = this.#series.get(listener);
    if (!byFace) {
      byFace = new Map();
      this.#series.set(listener, byFace);
    }
    let byRoute = byFace.get(face);
    if (!byRoute) {
      byRoute = new Map();
      byFace.set(face, byRoute);
    }
    let series = byRoute.get(route);
    if (!series) {
      const buckets = new Float64Array(this.#buckets.length + 1);
      series = { labels: { listener, face, route }, buckets, sum: 0, count: 0, counts: new Map() };
      byRoute.set(route, series);
    }
    return series;
  }
}

/** A series' histogram samples as prom-client prints them: cumulative buckets, `+Inf`, sum and count. */
function histogramSamples(name: string, bounds: readonly number[], s: RouteSeries): Sample[] {
  let seen = 0;
  const samples: Sample[] = bounds.map((le, i) => {
    seen += s.buckets[i] ?? 0;
    return { labels: { le, ...s.labels }, value: seen, metricName: `${name}_bucket` };
  });
  samples.push({
    labels: { le: "+Inf", ...s.labels },
    value: s.count,
    metricName: `${name}_bucket`,
  });
  samples.push({ labels: s.labels, value: s.sum, metricName: `${name}_sum` });
  samples.push({ labels: s.labels, value: s.count, metricName: `${name}_count` });
  return samples;
}

/** A counter family whose samples are read from counts kept elsewhere, when scraped. */
class ScrapedCounter extends PromCounter {
  readonly #samples: () => Sample[];
  constructor(registry: Registry, name: string, help: string, samples: () => Sample[]) {
    super({ name, help, labelNames: [], registers: [registry] });
    this.#samples = samples;
  }
  override async get() {
    return { ...(await super.get()), values: this.#samples() };
  }
}

/** A histogram family whose samples are read from observations kept elsewhere, when scraped. */
class ScrapedHistogram extends Histogram {
  readonly #family: { name: string; help: string };
  readonly #samples: () => Sample[];
  constructor(
    registry: Registry,
    name: string,
    help: string,
    buckets: readonly number[],
    samples: () => Sample[],
  ) {
    super({ name, help, labelNames: [], buckets: [...buckets], registers: [registry] });
    this.#family = { name, help };
    this.#samples = samples;
  }
  override async get() {
    const { name, help } = this.#family;
    return {
      name,
      help,
      // prom-client's typings call the type a numeric enum; it is this string at run time (library interop).
      type: "histogram" as never,
      aggregator: "sum" as const,
      collect: () => undefined,
      values: this.#samples(),
    };
  }
  /** What the registry prints (prom-client's histogram would print its own, empty, observations). */
  getForPromString() {
    return this.get();
  }
}

/** One sample of a gauge read when scraped. */
export interface GaugeSample {
  labels: Record<string, string>;
  value: number;
}
/** Reads a gauge's samples (from the database, typically); called once per scrape. */
export type GaugeReader = () => Promise<GaugeSample[]>;

/**
 * A gauge whose samples are what its reader returns at each scrape. It reads in `get` rather than filling the
 * gauge in prom-client's `collect`: values set through a prom-client gauge must carry the label names it was
 * made with, and callers of {@link Metrics.gauge} declare none (the listeners' `http_connections_open`). Nothing
 * is kept between scrapes either, so a series whose rows are gone (a queue emptied) is gone from the next one.
 */
class GaugeReadWhenScraped extends Gauge {
  readonly #read: GaugeReader;
  constructor(registry: Registry, name: string, help: string, read: GaugeReader) {
    super({ name, help, registers: [registry] });
    this.#read = read;
  }
  override async get() {
    const values = await this.#read();
    return { ...(await super.get()), values };
  }
}

/** The service's metrics, one set per process (per service, where a test runs several in one process). */
export function createMetrics() {
  const registry = new Registry();
  const http = new HttpMetrics(registry, latencyBuckets);
  const families = {
    http,
    ...refusalCounters(registry),
    ...webhookMetrics(registry),
    ...snapshotMetrics(registry),
    ...outcomeCounters(registry),
    ...requestLogCounters(registry),
  };
  // process_* (CPU, memory, file descriptors, start time) and nodejs_* (event-loop lag, GC, heap, handles).
  collectDefaultMetrics({ register: registry });
  return {
    ...families,
    /** Adds a gauge read at scrape time. */
    gauge(name: string, help: string, read: GaugeReader): void {
      new GaugeReadWhenScraped(registry, name, help, read);
    },
    /**
     * The exposition text, within {@link SCRAPE_BUDGET_MS}. A gauge that cannot be read in time is left out (and
     * says so), the rest is served; scrapes that arrive together share one reading (metrics-render.ts).
     */
    render: renderer(registry),
  };
}

/** What {@link createMetrics} returns. */
export type Metrics = ReturnType<typeof createMetrics>;
