import type { Clock } from "./clock.ts";
import type { Em, Orm } from "./db/orm.ts";
import { poolStats } from "./db/pool-stats.ts";
import { sql } from "./db/sql.ts";
import { BOSS_SCHEMA } from "./jobs/boss.ts";
import type { Metrics } from "./metrics.ts";

/** Runs one read-only query on a fresh entity manager (the pool, outside any transaction). */
type Query = <T>(text: string, params: unknown[]) => Promise<T[]>;

/**
 * Gauges read when scraped. Those read from the database describe the shared state of the deployment, so every
 * instance reports the same values: aggregate them with `max`, not `sum`. The pools' are this process's own.
 */
export function registerDatabaseGauges(metrics: Metrics, orm: Orm, clock: Clock): void {
  const query: Query = (text, params) => readForScrape(orm, (em) => sql(em, text, params));
  const now = () => clock.now();
  // The pools first: read at once, before the database gauges wait for a connection of the very pool they
  // describe (a scrape while the pool is full would otherwise say how it was once the wait was over).
  registerPoolGauges(metrics);
  registerDeliveryGauges(metrics, query, now);
  registerJobQueueGauges(metrics, query);
  registerMoneyGauges(metrics, query, now);
}

/** How long a gauge's statement may run (lock waits included): a scrape holds a connection at most this long. */
export const GAUGE_STATEMENT_MS = 1_000;

/**
 * Runs a gauge's read in a transaction of its own with short statement and lock time-outs: a scrape during a
 * database incident (a lock held, a slow table) gives its connection back within {@link GAUGE_STATEMENT_MS}
 * rather than the service's statement time-out, and leaves that family out.
 */
export function readForScrape<T>(orm: Orm, read: (em: Em) => Promise<T>): Promise<T> {
  return orm.em.fork().transactional(async (em) => {
    await sql(em, "select set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)", [
      String(GAUGE_STATEMENT_MS),
    ]);
    return read(em);
  });
}

/** This process's database connection pools: in use, idle, and units of work waiting for a connection. */
function registerPoolGauges(metrics: Metrics): void {
  metrics.gauge(
    "db_pool_connections",
    "This process's pooled database connections by pool (its application_name) and state (in_use, idle).",
    async () =>
      poolStats().flatMap((s) => [
        { labels: { pool: s.name, state: "in_use" }, value: s.inUse },
        { labels: { pool: s.name, state: "idle" }, value: s.idle },
      ]),
  );
  metrics.gauge(
    "db_pool_waiting",
    "Units of work in this process waiting for a pooled database connection, by pool.",
    async () => poolStats().map((s) => ({ labels: { pool: s.name }, value: s.waiting })),
  );
}

/** Webhook deliveries whose time has come, and how long the most overdue one has waited. */
function registerDeliveryGauges(metrics: Metrics, query: Query, now: () => Date): void {
  metrics.gauge(
    "webhook_deliveries_due",
    "Webhook deliveries waiting for an attempt whose time has come, by environment.",
    async () =>
      (
        await query<{ environment: string; n: string }>(
          `select w.environment, count(*)::text as n from webhook_deliveries d join webhooks w on w.id = d.webhook_id
            where d.status in ('PENDING', 'FAILED') and d.next_attempt_at <= $1 group by w.environment`,
          [now()],
        )
      ).map((r) => ({ labels: { environment: r.environment }, value: Number(r.n) })),
  );
  metrics.gauge(
    "webhook_deliveries_oldest_due_seconds",
    "How long the most overdue webhook delivery has been waiting past its planned time (0 when none is).",
    async () => {
      const [row] = await query<{ age: number | null }>(
        `select extract(epoch from ($1::timestamptz - min(next_attempt_at)))::float8 as age
           from webhook_deliveries where status in ('PENDING', 'FAILED') and next_attempt_at <= $1`,
        [now()],
      );
      return [{ labels: {}, value: Math.max(0, row?.age ?? 0) }];
    },
  );
}

/** pg-boss's jobs ready to run and not yet taken, and the oldest one's wait, by queue. */
function registerJobQueueGauges(metrics: Metrics, query: Query): void {
  metrics.gauge("job_queue_depth", "Jobs ready to run and not yet taken, by queue.", async () =>
    (
      await query<{ name: string; n: string }>(
        `select name, count(*)::text as n from ${BOSS_SCHEMA}.job
            where state in ('created', 'retry') and start_after <= now() group by name`,
        [],
      )
    ).map((r) => ({ labels: { queue: r.name }, value: Number(r.n) })),
  );
  metrics.gauge(
    "job_queue_oldest_seconds",
    "Age of the oldest job ready to run and not yet taken, by queue.",
    async () =>
      (
        await query<{ name: string; age: number }>(
          `select name, extract(epoch from (now() - min(start_after)))::float8 as age from ${BOSS_SCHEMA}.job
            where state in ('created', 'retry') and start_after <= now() group by name`,
          [],
        )
      ).map((r) => ({ labels: { queue: r.name }, value: Math.max(0, r.age) })),
  );
}

/** Payouts not yet settled, and repayment debits whose time has come. */
function registerMoneyGauges(metrics: Metrics, query: Query, now: () => Date): void {
  metrics.gauge(
    "payouts_in_flight",
    "Disbursements not yet settled, by environment and status (PENDING, PROCESSING).",
    async () =>
      (
        await query<{ environment: string; status: string; n: string }>(
          `select environment, status, count(*)::text as n from disbursements
            where status in ('PENDING', 'PROCESSING') group by environment, status`,
          [],
        )
      ).map((r) => ({ labels: { environment: r.environment, status: r.status }, value: Number(r.n) })),
  );
  metrics.gauge(
    "debits_due",
    "Repayment debits whose time has come and that are not settled, by environment.",
    async () =>
      (
        await query<{ environment: string; n: string }>(
          `select d.environment, count(*)::text as n from installments i join disbursements d on d.id = i.disbursement_id
            where i.status = 'SCHEDULED' and i.next_attempt_at <= $1 group by d.environment`,
          [now()],
        )
      ).map((r) => ({ labels: { environment: r.environment }, value: Number(r.n) })),
  );
}
