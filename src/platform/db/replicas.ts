import type { Logger } from "../logger.ts";
import { isDatabaseUnavailable } from "../rpc/errors.ts";
import { formatLsn, type Lsn, PrimaryPosition } from "./lsn.ts";
import { createOrm, type DbTimeouts, type Em, type Orm, type Schema } from "./orm.ts";
import { hasApplied, PrimaryHistory, Replica, replicaName } from "./replica.ts";
import { sql } from "./sql.ts";

/** Where a read ran, and why not on a replica: the `db_reads_total` labels. */
export type ReadTarget =
  | { target: "replica"; reason: "fresh" }
  | { target: "primary"; reason: "no_healthy_replica" | "replica_behind" | "replica_failed" };

/** What {@link startReplicas} is built from. */
export interface ReplicaOptions {
  urls: readonly string[];
  schema: Schema;
  poolSize: number;
  timeouts: DbTimeouts;
  /** A replica further behind than this is left out until it catches up. */
  maxLagMs: number;
  /** How long a read waits for a replica to replay what it must see before it runs on the primary instead. */
  readWaitMs: number;
  /** The replicas' URLs are poolers in transaction mode (no named statements, no startup parameters). */
  pooled: boolean;
  logger: Logger;
  /** Told where each read ran. */
  onRead?: (where: ReadTarget) => void;
  /** How often each replica's replay position is read (and the primary's sampled, for the lag). */
  probeMs?: number;
}

/** What an operator sees of one replica (`/metrics`). */
export interface ReplicaStatus {
  /** `host:port/database`, no credentials. */
  name: string;
  healthy: boolean;
  /** How far behind the primary it is: how long ago the primary flushed what it has not yet applied. */
  lagMs: number;
}

/** Streaming replicas that serve reads: see {@link Replicas.read}. */
export interface Replicas {
  /**
   * Runs the read `fn` on a healthy replica that has replayed everything the primary had committed when this
   * call began, in a read-only transaction that checks so on the replica itself first; or, when no replica is
   * there within `readWaitMs` or the replica fails, on `primary()`. `prepare(em)` readies a replica's entity
   * manager as the primary's is (the tenant filter).
   */
  read<T>(primary: () => Em, prepare: (em: Em) => void, fn: (em: Em) => Promise<T>): Promise<T>;
  /**
   * As {@link read}, for a read of one statement that checks the replica itself (`replica_has_applied` first, in a
   * volatile function): `fn` gets the primary's WAL position it must see (null on the primary) and throws
   * {@link ReplicaBehind} when the statement found the replica short of it. No transaction, one round trip.
   */
  readAt<T>(
    primary: () => Em,
    prepare: (em: Em) => void,
    fn: (em: Em, after: string | null) => Promise<T>,
  ): Promise<T>;
  status(): ReplicaStatus[];
  close(): Promise<void>;
}

/**
 * A replica that has not applied what a read must see, found by the read's own check on the replica: the read is
 * made again on the primary. Thrown by a read of {@link Replicas.readAt} whose statement answered nothing for it.
 */
export class ReplicaBehind extends Error {}

/**
 * How long a read may wait on a replica (for a connection, and for its answer) before it is made on the primary
 * instead and the replica is left out until a probe finds it again: a replica whose network went silent (a
 * half-open connection answers nothing and reports no error) must not hold a partner's read. Reads on a
 * replica take milliseconds; its sessions' statement time-out is {@link REPLICA_STATEMENT_MS}, so a connection
 * left silent is dropped by the query watchdog (orm.ts) within seconds, not the primary's 30.
 */
export const REPLICA_READ_DEADLINE_MS = 2_000;
/** The statement time-out of replica sessions (at most): reads of a page or a snapshot, never long statements. */
export const REPLICA_STATEMENT_MS = 5_000;

/** A read on a replica that did not answer within {@link REPLICA_READ_DEADLINE_MS}. */
class ReplicaSilent extends Error {}

/** `read`, or {@link ReplicaSilent} once the deadline has passed (the read itself is left to end on its own). */
function withinDeadline<T>(read: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ReplicaSilent()), REPLICA_READ_DEADLINE_MS);
  });
  read.catch(() => undefined);
  return Promise.race([read, late]).finally(() => clearTimeout(timer));
}

/** Replicas chosen per read, probed in the background: what {@link startReplicas} returns. */
class ReplicaRouter implements Replicas {
  readonly #o: ReplicaOptions;
  readonly #replicas: Replica[];
  readonly #primary: Orm;
  readonly #history: PrimaryHistory;
  readonly #position = new PrimaryPosition();
  #next = 0;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> = Promise.resolve();

  constructor(o: ReplicaOptions, replicas: Replica[], primary: Orm) {
    this.#o = o;
    this.#replicas = replicas;
    this.#primary = primary;
    this.#history = new PrimaryHistory(Math.max(o.maxLagMs * 2, 10_000));
  }

  /** Samples the primary's position (for the lag), then probes every replica. */
  async probe(): Promise<void> {
    let primaryAt: Lsn | undefined;
    try {
      primaryAt = await this.#position.after(this.#primary.em.fork());
      this.#history.add(primaryAt);
    } catch {
      // The primary is down: the lag stays as last measured, and reads fail on the primary as they would anyway.
    }
    await Promise.all(this.#replicas.map((r) => r.probe(this.#history, primaryAt)));
  }

  /** The next probe is planned once this one has ended: a slow replica delays the probes, never piles them up. */
  keepProbing(everyMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.probe().finally(() => this.keepProbing(everyMs));
    }, everyMs);
    this.#timer.unref();
  }

  /** A healthy replica that has `lsn` already if any (taking turns), else the healthy one furthest on. */
  #choose(lsn: Lsn): Replica | undefined {
    const healthy = this.#replicas.filter((r) => r.healthy(this.#o.maxLagMs));
    if (!healthy.length) return undefined;
    const ready = healthy.filter((r) => r.applied >= lsn);
    if (ready.length) return ready[this.#next++ % ready.length];
    return healthy.reduce((a, b) => (b.applied > a.applied ? b : a));
  }

  async read<T>(primaryEm: () => Em, prepare: (em: Em) => void, fn: (em: Em) => Promise<T>): Promise<T> {
    return this.#route(
      primaryEm,
      (replica, lsn) => readOn(replica, lsn, prepare, fn),
      () => fn(primaryEm()),
    );
  }

  async readAt<T>(
    primaryEm: () => Em,
    prepare: (em: Em) => void,
    fn: (em: Em, after: string | null) => Promise<T>,
  ): Promise<T> {
    return this.#route(
      primaryEm,
      (replica, lsn) => {
        const em = replica.orm.em.fork();
        prepare(em);
        return fn(em, formatLsn(lsn));
      },
      () => fn(primaryEm(), null),
    );
  }

  /**
   * Runs `onReplica` on a healthy replica that has applied the primary's position as of now (waiting up to
   * `readWaitMs`), or `onPrimary`: when none is healthy or caught up, or the replica fails or is found behind.
   */
  async #route<T>(
    primaryEm: () => Em,
    onReplica: (replica: Replica, lsn: Lsn) => Promise<T>,
    onPrimary: () => Promise<T>,
  ): Promise<T> {
    const { onRead, maxLagMs, readWaitMs } = this.#o;
    if (!this.#replicas.some((r) => r.healthy(maxLagMs))) {
      onRead?.({ target: "primary", reason: "no_healthy_replica" });
      return onPrimary();
    }
    const lsn = await this.#position.after(primaryEm());
    this.#history.add(lsn);
    const replica = this.#choose(lsn);
    if (!replica || !(await replica.waitFor(lsn, readWaitMs))) {
      onRead?.({ target: "primary", reason: replica ? "replica_behind" : "no_healthy_replica" });
      return onPrimary();
    }
    try {
      const result = await withinDeadline(onReplica(replica, lsn));
      onRead?.({ target: "replica", reason: "fresh" });
      return result;
    } catch (err) {
      const behind = err instanceof ReplicaBehind || recoveryConflict(err);
      if (!behind && !isDatabaseUnavailable(err) && !(err instanceof ReplicaSilent)) {
        // Answered on the replica, with the read's own error (a 404, say).
        onRead?.({ target: "replica", reason: "fresh" });
        throw err;
      }
      if (!behind) replica.down();
      onRead?.({ target: "primary", reason: behind ? "replica_behind" : "replica_failed" });
      return onPrimary();
    }
  }

  status(): ReplicaStatus[] {
    return this.#replicas.map((r) => ({
      name: r.name,
      healthy: r.healthy(this.#o.maxLagMs),
      lagMs: Number.isFinite(r.lagMs) ? r.lagMs : -1,
    }));
  }

  async close(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running.catch(() => undefined);
    await Promise.all(this.#replicas.map((r) => r.close()));
  }
}

/**
 * Runs `fn` on `replica` in a read-only transaction whose first statements check, on the replica itself, that it
 * has applied `lsn` ({@link hasApplied}): every statement after them sees every transaction applied by then.
 * (The probe's figure is not enough: a restarted replica may start again from an earlier position.)
 */
function readOn<T>(
  replica: Replica,
  lsn: Lsn,
  prepare: (em: Em) => void,
  fn: (em: Em) => Promise<T>,
): Promise<T> {
  const em = replica.orm.em.fork();
  prepare(em);
  return em.transactional(
    async (tx) => {
      if (!(await hasApplied((text, params) => sql(tx, text, params), lsn))) throw new ReplicaBehind();
      return fn(tx);
    },
    { readOnly: true },
  );
}

/**
 * Opens a pool per replica and starts probing them. A replica that is down at start is left out until it
 * answers; the service starts all the same.
 */
export async function startReplicas(o: ReplicaOptions, primary: Orm): Promise<Replicas> {
  const replicas = await Promise.all(
    o.urls.map(async (url) => {
      const orm = await createOrm({
        databaseUrl: url,
        schema: o.schema,
        poolSize: o.poolSize,
        logger: o.logger,
        timeouts: { ...o.timeouts, statementMs: Math.min(o.timeouts.statementMs, REPLICA_STATEMENT_MS) },
        pooled: o.pooled,
        applicationName: "partner-api reads",
        poolLabel: `partner-api reads ${replicaName(url)}`,
      });
      return new Replica(replicaName(url), url, orm, o.logger);
    }),
  );
  const router = new ReplicaRouter(o, replicas, primary);
  await router.probe();
  router.keepProbing(o.probeMs ?? 200);
  return router;
}

/**
 * A replica cancelling a read because replay needed what it was reading (`canceling statement due to conflict
 * with recovery`, 40001 on a hot standby): the primary answers it instead, and the replica stays in.
 */
function recoveryConflict(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  return e?.code === "40001" && /conflict with recovery/i.test(e.message ?? "");
}
