/** The service's counters and histograms by family: refusals, webhooks, outcomes (platform/metrics.ts). */
import { Histogram, Counter as PromCounter, type Registry } from "prom-client";

/**
 * Latency buckets, in seconds, from 1 ms to 30 s. 0.28 is the contract's snapshot p99 bound: the share of reads
 * over it is counted, not interpolated (ops/prometheus/alerts.yml).
 */
export const latencyBuckets = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.28, 0.5, 1, 2.5, 5, 10, 30,
] as const;

/** A monotonically increasing count, by its label names' values. */
export class Counter<L extends string = string> {
  readonly #counter: PromCounter<L>;
  constructor(registry: Registry, name: string, help: string, labelNames: readonly L[]) {
    this.#counter = new PromCounter({ name, help, labelNames, registers: [registry] });
  }
  inc(labels: Record<L, string>, by = 1): void {
    this.#counter.inc(labels, by);
  }
  /** The current value for these labels (tests read it). */
  async get(labels: Record<L, string>): Promise<number> {
    const { values } = await this.#counter.get();
    const wanted = Object.entries(labels);
    const found = values.find(
      (v) =>
        Object.keys(v.labels).length === wanted.length &&
        wanted.every(([k, value]) => v.labels[k as L] === value),
    );
    return found?.value ?? 0;
  }
}

/** Connections and limits: what the listeners and the rate limits refuse. */
export function refusalCounters(registry: Registry) {
  return {
    connectionsRefused: new Counter(
      registry,
      "http_connections_refused_total",
      "New connections closed at once by a connection cap, by listener and reason (listener_limit, address_limit).",
      ["listener", "reason"],
    ),
    connectionsEvicted: new Counter(
      registry,
      "http_connections_evicted_total",
      "Idle connections (no request in flight), closed to admit a new one at their listener's cap, by listener.",
      ["listener"],
    ),
    rateLimitRejections: new Counter(
      registry,
      "rate_limit_rejections_total",
      "Requests refused with 429 rate_limited, by class (read or write).",
      ["class"],
    ),
    expensiveLimitRejections: new Counter(
      registry,
      "expensive_limit_rejections_total",
      "Requests refused with 429 by a limit on expensive work, by limit (snapshot_concurrency, user_daily_disbursements, webhook_sends).",
      ["limit"],
    ),
  };
}

/** Webhook deliveries: attempts, their timing, and deliveries put off. */
export function webhookMetrics(registry: Registry) {
  const histogram = <L extends string>(name: string, help: string, labelNames: L[]) =>
    new Histogram<L>({ name, help, labelNames, buckets: [...latencyBuckets], registers: [registry] });
  return {
    webhookAttempts: new Counter(
      registry,
      "webhook_delivery_attempts_total",
      "Webhook delivery attempts by outcome: delivered, retrying (failed, another attempt planned), given_up.",
      ["outcome"],
    ),
    webhookLatency: histogram(
      "webhook_delivery_attempt_duration_seconds",
      "Time a delivery attempt took, connection to response, by outcome.",
      ["outcome"],
    ),
    webhookFirstAttemptDelay: histogram(
      "webhook_event_to_first_attempt_seconds",
      "Time from an event's creation to the first attempt at delivering it.",
      [],
    ),
    webhookAttemptLateness: histogram(
      "webhook_delivery_attempt_lateness_seconds",
      "How late a scheduled attempt (a retry, or a delivery moved to a later time) started after its planned time.",
      [],
    ),
    webhookDeferred: new Counter(
      registry,
      "webhook_deliveries_deferred_total",
      "Deliveries moved to a later time instead of being attempted at once, by reason: capacity (its subscription or partner at its limit in flight), circuit (its subscription's circuit open).",
      ["reason"],
    ),
  };
}

/**
 * Snapshots served (200), from the moment the request had arrived whole (its body read, for a Connect or gRPC
 * call) to its answer: what CONTRACT.md's 280 ms p99 is about. Refusals (a 403 without consent, a 429) and the
 * time a client takes to send its body are not in it, so no partner moves it but by the reads it is served.
 */
export function snapshotMetrics(registry: Registry) {
  return {
    snapshotReads: new Histogram<"face">({
      name: "snapshot_read_duration_seconds",
      help: "Snapshots served (200), from the request's arrival whole to its answer, by face.",
      labelNames: ["face"],
      buckets: [...latencyBuckets],
      registers: [registry],
    }),
  };
}

/** Money moved, rows purged, and calls made where they must not be. */
export function outcomeCounters(registry: Registry) {
  return {
    payouts: new Counter(
      registry,
      "payouts_total",
      "Payout outcomes recorded by this process, by environment and outcome (delivered, failed, reversed).",
      ["environment", "outcome"],
    ),
    debits: new Counter(
      registry,
      "debits_total",
      "Repayment debit outcomes recorded by this process, by environment and outcome (collected, failed, retrying).",
      ["environment", "outcome"],
    ),
    retentionPurged: new Counter(
      registry,
      "retention_purged_rows_total",
      "Rows deleted by the retention purge, by table (a fixed set: the tables the purge deletes from).",
      ["table"],
    ),
    retentionDroppedPartitions: new Counter(
      registry,
      "retention_dropped_partitions_total",
      "Monthly partitions dropped whole by the retention purge, by partitioned table (their rows are not counted in retention_purged_rows_total).",
      ["table"],
    ),
    dbReads: new Counter(
      registry,
      "db_reads_total",
      "Partner reads that may run on a streaming replica, by where they ran (target: replica, primary) and why (reason: fresh; no_healthy_replica, replica_behind, replica_failed).",
      ["target", "reason"],
    ),
    networkInTransaction: new Counter(
      registry,
      "network_calls_in_transaction_total",
      "Outbound calls (dns, http, fetch) that started while a database transaction was open: each is a bug that could drain the pool; the log line says where.",
      ["kind"],
    ),
  };
}

/** The partners' request log: calls written, and calls left out rather than slowing any call. */
export function requestLogCounters(registry: Registry) {
  return {
    requestLogWritten: new Counter(
      registry,
      "request_log_written_total",
      "Calls made with partners' API keys written to their request log.",
      [],
    ),
    requestLogDropped: new Counter(
      registry,
      "request_log_dropped_total",
      "Calls left out of the request log, by reason: buffer_full (the database fell behind), write_failed.",
      ["reason"],
    ),
  };
}
