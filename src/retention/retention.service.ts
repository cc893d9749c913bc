import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";

/**
 * Every table the retention purge deletes from: the `table` label of `retention_purged_rows_total`, a fixed set
 * (docs/operations.md "Retention").
 */
export const PURGED_TABLES = [
  "events",
  "webhook_deliveries",
  "webhook_attempts",
  "webhooks",
  "consent_links",
  "disbursements",
  "installments",
  "book_entries",
  "sandbox_transfers",
  "sandbox_debits",
  "sandbox_refunds",
  "ledger_entries",
  "ledger_daily",
  "ledger_counterparties",
  "ledger_counterparty_days",
  "portal_sessions",
  "portal_invites",
  "portal_audit_events",
  "portal_signin_throttles",
  "rate_limit_buckets",
  "request_log",
] as const;

/**
 * How long the ledger lines of sandbox partners' collections and refunds are kept: longer than the longest
 * snapshot window (365 days), so purging them changes no snapshot.
 */
export const LEDGER_LINES_RETENTION_DAYS = 400;

/** A table the retention purge deletes from. */
export type PurgedTable = (typeof PURGED_TABLES)[number];

/** What one batch of a purge step did. */
export interface PurgeBatch {
  /** Rows the batch picked (and locked) to purge; the step is done when a batch picks none. */
  picked: number;
  /** Rows deleted, per table. */
  deleted: Partial<Record<PurgedTable, number>>;
}

/**
 * One purge, defined by the feature that owns its tables: `batch` picks at most `limit` rows that ended
 * before `cutoff` (with `FOR UPDATE SKIP LOCKED`, so it never waits on a row in use) and deletes them with
 * whatever hangs on them, inside the transaction `tx` the runner opened for that batch alone.
 */
export interface PurgeStep {
  /** For logs and the job's output. */
  name: string;
  /**
   * Which retention counts: RETENTION_DAYS, SANDBOX_RETENTION_DAYS, LEDGER_LINES_RETENTION_DAYS,
   * PORTAL_AUDIT_RETENTION_DAYS (`audit`), or none (`now`: the cut-off is the run's now, for rows whose own
   * expiry is their end, such as portal sessions).
   */
  retention: "default" | "sandbox" | "ledger" | "audit" | "now";
  /**
   * Where the step's tables are monthly partitions: drops the months wholly past the cut-off before any batch
   * runs (outside a transaction: a partition is detached concurrently), so that a month's backlog costs a drop,
   * not its rows; the batches then delete the edges row by row.
   */
  dropWhole?(em: Em, cutoff: Date): Promise<WholeMonths>;
  batch(tx: Em, cutoff: Date, limit: number): Promise<PurgeBatch>;
}

/** What a step's {@link PurgeStep.dropWhole} did. */
export interface WholeMonths {
  /** The partitions dropped (`<table>_<yyyy>_<mm>`, or `<table>_before`). */
  dropped: string[];
  /** Rows deleted one by one on the way, per table. */
  deleted: Partial<Record<PurgedTable, number>>;
}

/** What one run did, per step: partitions dropped, batches run and rows deleted per table. */
export type PurgeReport = Record<
  string,
  { dropped: string[]; batches: number; deleted: Partial<Record<PurgedTable, number>> }
>;

/** How long finished data is kept: the operator's settings (docs/operations.md "Retention"). */
export interface RetentionPeriods {
  /** RETENTION_DAYS: events and their deliveries, decided or expired consent links, deleted webhooks. */
  days: number;
  /** SANDBOX_RETENTION_DAYS: sandbox disbursements, their installments, books and the simulator's records. */
  sandboxDays: number;
  /** RETENTION_BATCH_SIZE: rows one purge statement deletes at most. */
  batchSize: number;
  /** PORTAL_AUDIT_RETENTION_DAYS: the portal's audit events. */
  auditDays: number;
}

/** Options for {@link createRetentionService}. */
export interface RetentionServiceOptions {
  clock: Clock;
  retention: RetentionPeriods;
  metrics: Metrics;
  logger: Logger;
  steps: PurgeStep[];
  /** A run starts no new batch after this long; what is left waits for the next run (10 minutes). */
  budgetMs?: number;
}

/** What {@link createRetentionService} returns. */
export type RetentionService = ReturnType<typeof createRetentionService>;

/**
 * The retention purge (CONTRACT.md §11): runs each feature's purge step in small batches, each batch its own
 * short transaction, until a batch finds nothing left or the run's time budget is spent, and counts every
 * deleted row in `retention_purged_rows_total{table}` once its batch has committed.
 */
export function createRetentionService(o: RetentionServiceOptions) {
  const budgetMs = o.budgetMs ?? 10 * ms.minute;
  // Every series exists from the start, at 0, so a rate over it is defined before the first purge.
  for (const table of PURGED_TABLES) o.metrics.retentionPurged.inc({ table }, 0);
  /** Adds rows deleted to a step's report and to `retention_purged_rows_total`. */
  const count = (done: PurgeReport[string], deleted: Partial<Record<PurgedTable, number>>) => {
    for (const [table, n] of Object.entries(deleted) as [PurgedTable, number][]) {
      if (n === 0) continue;
      done.deleted[table] = (done.deleted[table] ?? 0) + n;
      o.metrics.retentionPurged.inc({ table }, n);
    }
  };
  return {
    /** Purges everything past its retention as of the clock's now; returns what it did, per step. */
    async purge(em: Em): Promise<PurgeReport> {
      const now = o.clock.now().getTime();
      const cutoffs = {
        default: new Date(now - o.retention.days * ms.day),
        sandbox: new Date(now - o.retention.sandboxDays * ms.day),
        ledger: new Date(now - LEDGER_LINES_RETENTION_DAYS * ms.day),
        audit: new Date(now - o.retention.auditDays * ms.day),
        now: new Date(now),
      };
      const deadline = Date.now() + budgetMs;
      const report: PurgeReport = {};
      for (const step of o.steps) {
        const done: PurgeReport[string] = { dropped: [], batches: 0, deleted: {} };
        report[step.name] = done;
        if (step.dropWhole) {
          const whole = await step.dropWhole(em, cutoffs[step.retention]);
          done.dropped = whole.dropped;
          count(done, whole.deleted);
          for (const name of whole.dropped)
            o.metrics.retentionDroppedPartitions.inc({
              table: name.replace(/_(before|\d{4}_\d{2}(_\d{2})?)$/, ""),
            });
        }
        for (;;) {
          const batch = await em.transactional((tx) =>
            step.batch(tx, cutoffs[step.retention], o.retention.batchSize),
          );
          done.batches += 1;
          count(done, batch.deleted);
          if (batch.picked === 0) break;
          if (Date.now() > deadline) {
            o.logger.warn("retention purge stopped at its time budget; the next run goes on", {
              step: step.name,
            });
            return report;
          }
        }
      }
      const deleted = Object.values(report).filter(
        (r) => Object.keys(r.deleted).length > 0 || r.dropped.length > 0,
      );
      if (deleted.length > 0) o.logger.info("purged rows past their retention", { report });
      return report;
    },
  };
}
