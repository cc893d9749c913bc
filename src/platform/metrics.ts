/**
 * Prometheus metrics in the text exposition format (version 0.0.4), without a client library: counters and
 * histograms kept in memory per process, and gauges read when scraped. Label values are bounded by the
 * callers (route templates, never raw URLs or ids).
 */

type Labels = Record<string, string>;

/** The `method` label's values: the standard methods, and `other` for anything else a client sends. */
const METHOD_LABELS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
const labelText = (labels: Labels) => {
  const entries = Object.entries(labels);
  return entries.length ? `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}` : "";
};
/** A series' key: its label values in the order given (each metric's callers pass its labels in one order). */
const keyOf = (labels: Labels) => {
  let key = "";
  for (const k in labels) key += `${labels[k]}\u0001`;
  return key;
};

interface Metric {
  render(): string | Promise<string>;
}

/** A monotonically increasing count. */
export class Counter implements Metric {
  readonly #values = new Map<string, { labels: Labels; value: number }>();
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }
  inc(labels: Labels = {}, by = 1): void {
    const key = keyOf(labels);
    const entry = this.#values.get(key);
    if (entry) entry.value += by;
    else this.#values.set(key, { labels, value: by });
  }
  /** The current value for these labels (tests and benchmarks read it). */
  get(labels: Labels = {}): number {
    return this.#values.get(keyOf(labels))?.value ?? 0;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, value } of this.#values.values())
      lines.push(`${this.name}${labelText(labels)} ${value}`);
    return lines.join("\n");
  }
}

/** Observations in cumulative buckets, with their sum and count. */
export class Histogram implements Metric {
  readonly #values = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  readonly name: string;
  readonly help: string;
  readonly buckets: readonly number[];
  constructor(name: string, help: string, buckets: readonly number[]) {
    this.name = name;
    this.help = help;
    this.buckets = buckets;
  }
  observe(labels: Labels, value: number): void {
    const key = keyOf(labels);
    let entry = this.#values.get(key);
    if (!entry) {
      entry = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.#values.set(key, entry);
    }
    for (let i = 0; i < this.buckets.length; i++) {
      if (value <= (this.buckets[i] as number)) entry.counts[i] = (entry.counts[i] ?? 0) + 1;
    }
    entry.sum += value;
    entry.count += 1;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const { labels, counts, sum, count } of this.#values.values()) {
      this.buckets.forEach((le, i) => {
        lines.push(`${this.name}_bucket${labelText({ ...labels, le: String(le) })} ${counts[i]}`);
      });
      lines.push(`${this.name}_bucket${labelText({ ...labels, le: "+Inf" })} ${count}`);
      lines.push(`${this.name}_sum${labelText(labels)} ${sum}`);
      lines.push(`${this.name}_count${labelText(labels)} ${count}`);
    }
    return lines.join("\n");
  }
}

/** Values read when scraped (from the database, typically). */
export class Gauge implements Metric {
  readonly name: string;
  readonly help: string;
  readonly read: () => Promise<{ labels: Labels; value: number }[]>;
  constructor(name: string, help: string, read: () => Promise<{ labels: Labels; value: number }[]>) {
    this.name = name;
    this.help = help;
    this.read = read;
  }
  async render(): Promise<string> {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    for (const { labels, value } of await this.read())
      lines.push(`${this.name}${labelText(labels)} ${value}`);
    return lines.join("\n");
  }
}

/**
 * Requests: a count per listener, face, route, method and status, and a latency histogram per listener,
 * face and route. Recorded on every request, so kept to two map lookups and no allocation once a series exists.
 */
export class HttpMetrics implements Metric {
  readonly #counts = new Map<string, { labels: string; value: number }>();
  readonly #latency = new Map<string, { labels: string; counts: Float64Array; sum: number; count: number }>();
  readonly #buckets: readonly number[];
  constructor(buckets: readonly number[]) {
    this.#buckets = buckets;
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
    method = METHOD_LABELS.has(method) ? method : "other";
    const statusLabel = status >= 100 && status <= 599 ? String(status) : "other";
    const series = `${listener}\u0001${face}\u0001${route}`;
    const countKey = `${series}\u0001${method}\u0001${statusLabel}`;
    const c = this.#counts.get(countKey);
    if (c) c.value += 1;
    else
      this.#counts.set(countKey, {
        labels: labelText({ listener, face, route, method, status: statusLabel }),
        value: 1,
      });
    let h = this.#latency.get(series);
    if (!h) {
      h = {
        labels: labelText({ listener, face, route }),
        counts: new Float64Array(this.#buckets.length),
        sum: 0,
        count: 0,
      };
      this.#latency.set(series, h);
    }
    const buckets = this.#buckets;
    for (let i = buckets.length - 1; i >= 0 && seconds <= (buckets[i] as number); i--)
      h.counts[i] = (h.counts[i] ?? 0) + 1;
    h.sum += seconds;
    h.count += 1;
  }
  render(): string {
    const lines = [
      "# HELP http_requests_total Requests answered, by listener, face, route, method and status.",
      "# TYPE http_requests_total counter",
    ];
    for (const { labels, value } of this.#counts.values())
      lines.push(`http_requests_total${labels} ${value}`);
    lines.push(
      "# HELP http_request_duration_seconds Time from the request's arrival to the end of its response, by listener, face and route.",
      "# TYPE http_request_duration_seconds histogram",
    );
    for (const { labels, counts, sum, count } of this.#latency.values()) {
      const inner = labels.slice(1, -1);
      this.#buckets.forEach((le, i) => {
        lines.push(`http_request_duration_seconds_bucket{${inner},le="${le}"} ${counts[i]}`);
      });
      lines.push(`http_request_duration_seconds_bucket{${inner},le="+Inf"} ${count}`);
      lines.push(`http_request_duration_seconds_sum${labels} ${sum}`);
      lines.push(`http_request_duration_seconds_count${labels} ${count}`);
    }
    return lines.join("\n");
  }
}

/** Latency buckets, in seconds, from 1 ms to 30 s. */
export const latencyBuckets = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
] as const;

/** The service's metrics, one set per process. */
export function createMetrics() {
  const http = new HttpMetrics(latencyBuckets);

  const rateLimitRejections = new Counter(
    "rate_limit_rejections_total",
    "Requests refused with 429 rate_limited, by class (read or write).",
  );
  const expensiveLimitRejections = new Counter(
    "expensive_limit_rejections_total",
    "Requests refused with 429 by a limit on expensive work, by limit (snapshot_concurrency, user_daily_disbursements, webhook_sends).",
  );
  const webhookAttempts = new Counter(
    "webhook_delivery_attempts_total",
    "Webhook delivery attempts by outcome: delivered, retrying (failed, another attempt planned), given_up.",
  );
  const webhookLatency = new Histogram(
    "webhook_delivery_attempt_duration_seconds",
    "Time a delivery attempt took, connection to response, by outcome.",
    latencyBuckets,
  );
  const webhookFirstAttemptDelay = new Histogram(
    "webhook_event_to_first_attempt_seconds",
    "Time from an event's creation to the first attempt at delivering it.",
    latencyBuckets,
  );
  const webhookAttemptLateness = new Histogram(
    "webhook_delivery_attempt_lateness_seconds",
    "How late a scheduled attempt (a retry, or a delivery moved to a later time) started after its planned time.",
    latencyBuckets,
  );
  const webhookDeferred = new Counter(
    "webhook_deliveries_deferred_total",
    "Deliveries moved to a later time instead of being attempted at once, by reason: capacity (its subscription or partner at its limit in flight), circuit (its subscription's circuit open).",
  );
  const payouts = new Counter(
    "payouts_total",
    "Payout outcomes recorded by this process, by environment and outcome (delivered, failed, reversed).",
  );
  const debits = new Counter(
    "debits_total",
    "Repayment debit outcomes recorded by this process, by environment and outcome (collected, failed, retrying).",
  );
  const retentionPurged = new Counter(
    "retention_purged_rows_total",
    "Rows deleted by the retention purge, by table (a fixed set: the tables the purge deletes from).",
  );
  const networkInTransaction = new Counter(
    "network_calls_in_transaction_total",
    "Outbound calls (dns, http, fetch) that started while a database transaction was open: each is a bug that could drain the pool; the log line says where.",
  );
  const connectionsRefused = new Counter(
    "http_connections_refused_total",
    "New connections closed at once by a connection cap, by listener and reason (listener_limit, address_limit).",
  );
  const connectionsEvicted = new Counter(
    "http_connections_evicted_total",
    "Idle connections (no request in flight), closed to admit a new one at their listener's cap, by listener.",
  );
  const gauges: Gauge[] = [];
  const all: Metric[] = [
    http,
    connectionsRefused,
    connectionsEvicted,
    rateLimitRejections,
    expensiveLimitRejections,
    webhookAttempts,
    webhookLatency,
    webhookFirstAttemptDelay,
    webhookAttemptLateness,
    webhookDeferred,
    payouts,
    debits,
    retentionPurged,
    networkInTransaction,
  ];
  return {
    http,
    connectionsRefused,
    connectionsEvicted,
    rateLimitRejections,
    expensiveLimitRejections,
    webhookAttempts,
    webhookLatency,
    webhookFirstAttemptDelay,
    webhookAttemptLateness,
    webhookDeferred,
    payouts,
    debits,
    retentionPurged,
    networkInTransaction,
    /** Adds a gauge read at scrape time. */
    gauge(name: string, help: string, read: Gauge["read"]): void {
      gauges.push(new Gauge(name, help, read));
    },
    /** The exposition text. A gauge that cannot be read is left out (and says so), the rest is served. */
    async render(): Promise<string> {
      const parts: string[] = [];
      for (const m of [...all, ...gauges]) {
        try {
          parts.push(await m.render());
        } catch (err) {
          parts.push(`# ${(m as Gauge).name} unavailable: ${(err as Error).message.split("\n")[0]}`);
        }
      }
      return `${parts.join("\n")}\n`;
    },
  };
}

/** What {@link createMetrics} returns. */
export type Metrics = ReturnType<typeof createMetrics>;
