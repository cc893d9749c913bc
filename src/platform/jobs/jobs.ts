import { fromKysely, type PgBoss, type SendOptions, type WorkOptions } from "pg-boss";
import type { Em, Orm } from "../db/orm.ts";
import { contextOf, inSpan, traceCarrier, tracingOn } from "../telemetry.ts";
import type { QueueName, Queues } from "./boss.ts";

/** A job to enqueue in a batch. */
export interface JobItem<Q extends QueueName> {
  data: Queues[Q];
  startAfter?: Date;
}

/**
 * The service's one way to queue and run jobs, type-checked against the {@link Queues} map. Every job
 * runs on an EntityManager forked for it alone, and every job sent from inside a transaction commits
 * (or rolls back) with that transaction.
 */
export interface Jobs {
  /**
   * Registers the worker of a queue. Each job of a fetched batch gets its own EntityManager; the jobs of
   * a batch run one after another unless `parallel` is set.
   */
  work<Q extends QueueName>(
    name: Q,
    options: WorkOptions & { parallel?: boolean },
    handler: (em: Em, data: Queues[Q]) => Promise<unknown>,
  ): Promise<void>;
  /** Registers a worker that takes a whole batch as one unit of work (one EntityManager for the batch). */
  workBatch<Q extends QueueName>(
    name: Q,
    options: WorkOptions,
    handler: (em: Em, data: Queues[Q][]) => Promise<unknown>,
  ): Promise<void>;
  /** Sends a job; inside `em`'s transaction when it has one. */
  send<Q extends QueueName>(
    em: Em,
    name: Q,
    data: Queues[Q],
    options?: Pick<SendOptions, "startAfter">,
  ): Promise<void>;
  /** Sends a job outside any unit of work (a wake-up at start). */
  sendNow<Q extends QueueName>(name: Q, data: Queues[Q]): Promise<void>;
  /** Sends several jobs of one queue in one statement; inside `em`'s transaction when it has one. */
  insert<Q extends QueueName>(em: Em, name: Q, items: JobItem<Q>[]): Promise<void>;
  /** Runs a queue on a cron schedule (UTC), on whichever worker's monitor fires. */
  schedule<Q extends QueueName>(name: Q, cron: string, data: Queues[Q]): Promise<void>;
}

/** Options for {@link createJobs}. */
export interface JobsOptions {
  boss: PgBoss;
  orm: Orm;
}

/** A job's data with the current trace context (`traceparent`), so the job continues the trace that queued it. */
const traced = (data: object): object => (tracingOn ? { ...data, ...traceCarrier() } : data);

/** Creates the typed job runner over pg-boss. */
export function createJobs({ boss, orm }: JobsOptions): Jobs {
  // pg-boss writes through the transaction's own connection (its `db` option), never a second one.
  const db = (em: Em) => {
    const context = em.getTransactionContext();
    // MikroORM's transaction context is a Kysely transaction; pg-boss's adapter names its own Kysely type.
    return context ? { db: fromKysely(context as never) } : {};
  };
  // With tracing on, each job runs in a span continuing the trace of the work that queued it (its data carries
  // that work's `traceparent`, see `traced` below).
  const run = <Q extends QueueName>(
    name: Q,
    data: Queues[Q],
    handler: (em: Em, data: Queues[Q]) => Promise<unknown>,
  ) =>
    inSpan(
      `job ${name}`,
      { "messaging.destination.name": name },
      () => handler(orm.em.fork(), data),
      contextOf(data as { traceparent?: unknown }),
    );
  return {
    async work(name, { parallel, ...options }, handler) {
      await boss.work<Queues[typeof name]>(name, options, async (jobs) => {
        if (parallel) return Promise.all(jobs.map((j) => run(name, j.data, handler)));
        const outputs: unknown[] = [];
        for (const j of jobs) outputs.push(await run(name, j.data, handler));
        return outputs.length === 1 ? outputs[0] : outputs;
      });
    },
    async workBatch(name, options, handler) {
      await boss.work<Queues[typeof name]>(name, options, async (jobs) =>
        handler(
          orm.em.fork(),
          jobs.map((j) => j.data),
        ),
      );
    },
    async send(em, name, data, options = {}) {
      await boss.send(name, traced(data), { ...options, ...db(em) });
    },
    async sendNow(name, data) {
      await boss.send(name, data as object);
    },
    async insert(em, name, items) {
      if (items.length === 0) return;
      await boss.insert(
        name,
        items.map((i) => ({ data: traced(i.data), ...(i.startAfter ? { startAfter: i.startAfter } : {}) })),
        db(em),
      );
    },
    async schedule(name, cron, data) {
      await boss.schedule(name, cron, data as object, { tz: "UTC" });
    },
  };
}
