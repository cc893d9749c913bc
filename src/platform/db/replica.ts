import pg from "pg";
import type { Logger } from "../logger.ts";
import { formatLsn, type Lsn, parseLsn } from "./lsn.ts";
import type { Orm } from "./orm.ts";

/** Runs one statement on one connection of a replica (a read's transaction, or the probe's own session). */
export type ReplicaQuery = <T>(text: string, params?: unknown[]) => Promise<T[]>;

/**
 * True when the replica has applied every complete WAL record up to `target`, a flush position of its primary
 * (`replica_has_applied`, platform/db/replica-applied.routine.ts): a snapshot taken afterwards (the next statement
 * of a transaction, or of a volatile function) sees every transaction the primary had acknowledged by then.
 */
export async function hasApplied(query: ReplicaQuery, target: Lsn): Promise<boolean> {
  const [row] = await query<{ ok: boolean }>("select replica_has_applied($1::pg_lsn) as ok", [
    formatLsn(target),
  ]);
  return row?.ok === true;
}

/** The primary's recent WAL positions and when they were seen, for measuring how far behind a replica is. */
export class PrimaryHistory {
  readonly #samples: { at: number; lsn: Lsn }[] = [];
  readonly #keepMs: number;

  constructor(keepMs: number) {
    this.#keepMs = keepMs;
  }

  add(lsn: Lsn, at = Date.now()): void {
    const last = this.#samples.at(-1);
    if (last && lsn <= last.lsn) return;
    this.#samples.push({ at, lsn });
    while (this.#samples.length > 1 && (this.#samples[0]?.at ?? at) < at - this.#keepMs)
      this.#samples.shift();
  }

  /** How long ago the primary first flushed past `applied` (0 when the replica has everything seen so far). */
  lagMs(applied: Lsn, now = Date.now()): number {
    const first = this.#samples.find((s) => s.lsn > applied);
    return first ? now - first.at : 0;
  }
}

/** Polls a replica's position every this often while reads wait for it. */
const POLL_MS = 2;
/** A replica that does not answer its probe within this long is left out. */
const PROBE_DEADLINE_MS = 1_000;

/** One replica: its pool, its probe connection, and the waits of reads for what they must see. */
export class Replica {
  /** The primary position up to which the replica is known to have applied everything (see {@link hasApplied}). */
  applied: Lsn = 0n;
  up = false;
  paused = false;
  lagMs = Number.POSITIVE_INFINITY;
  readonly name: string;
  readonly orm: Orm;
  readonly #url: string;
  readonly #logger: Logger;
  #probe: pg.Client | undefined;
  #waiters: { lsn: Lsn; resolve: (ok: boolean) => void }[] = [];
  #polling = false;

  constructor(name: string, url: string, orm: Orm, logger: Logger) {
    this.name = name;
    this.#url = url;
    this.orm = orm;
    this.#logger = logger;
  }

  healthy(maxLagMs: number): boolean {
    return this.up && !this.paused && this.lagMs <= maxLagMs;
  }

  /** Whether replay is paused, and how far it has applied the primary's latest position, within a second. */
  async probe(history: PrimaryHistory, primaryAt: Lsn | undefined): Promise<void> {
    try {
      const query = await this.#query();
      const [row] = await query<{ replayed: string | null; paused: boolean }>(
        "select pg_last_wal_replay_lsn()::text as replayed, pg_is_wal_replay_paused() as paused",
      );
      if (!row?.replayed) throw new Error("not a streaming replica: pg_last_wal_replay_lsn() is null");
      this.#seen(parseLsn(row.replayed));
      if (primaryAt !== undefined && primaryAt > this.applied && (await hasApplied(query, primaryAt)))
        this.#seen(primaryAt);
      this.paused = row.paused;
      if (!this.up) this.#logger.info("database replica is serving reads", { replica: this.name });
      this.up = true;
      this.lagMs = history.lagMs(this.applied);
    } catch (err) {
      this.#lost(err);
    }
  }

  /** Leaves the replica out until a probe finds it again. */
  down(): void {
    this.up = false;
    this.lagMs = Number.POSITIVE_INFINITY;
    const client = this.#probe;
    this.#probe = undefined;
    client?.end().catch(() => undefined);
    for (const w of this.#waiters.splice(0)) w.resolve(false);
  }

  /** True once the replica has applied `lsn`, false if it has not within `ms` (or went down). */
  waitFor(lsn: Lsn, ms: number): Promise<boolean> {
    if (this.applied >= lsn) return Promise.resolve(true);
    if (ms <= 0 || !this.up) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = { lsn, resolve };
      this.#waiters.push(waiter);
      setTimeout(() => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        resolve(this.applied >= lsn);
      }, ms).unref();
      void this.#poll();
    });
  }

  /** While reads wait, asks the replica how far it has applied the furthest position they wait for. */
  async #poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    try {
      while (this.#waiters.length && this.up) {
        let target = 0n;
        for (const w of this.#waiters) if (w.lsn > target) target = w.lsn;
        const query = await this.#query();
        if (await hasApplied(query, target)) this.#seen(target);
        else {
          const [row] = await query<{ replayed: string }>(
            "select pg_last_wal_replay_lsn()::text as replayed",
          );
          if (row?.replayed) this.#seen(parseLsn(row.replayed));
        }
        if (this.#waiters.length) await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } catch (err) {
      this.#lost(err);
    } finally {
      this.#polling = false;
    }
  }

  #seen(lsn: Lsn): void {
    if (lsn > this.applied) this.applied = lsn;
    this.#waiters = this.#waiters.filter((w) => {
      if (w.lsn > this.applied) return true;
      w.resolve(true);
      return false;
    });
  }

  #lost(err: unknown): void {
    if (this.up)
      this.#logger.warn("database replica left out", { replica: this.name, err: (err as Error).message });
    this.down();
  }

  /** The probe's own session (not one of the pool's), each statement within {@link PROBE_DEADLINE_MS}. */
  async #query(): Promise<ReplicaQuery> {
    let client = this.#probe;
    if (!client) {
      client = new pg.Client({
        connectionString: this.#url,
        application_name: "partner-api replica probe",
        connectionTimeoutMillis: PROBE_DEADLINE_MS,
      });
      client.on("error", () => this.down());
      await client.connect();
      this.#probe = client;
    }
    const session = client;
    return async <T>(text: string, params: unknown[] = []) =>
      (await withDeadline(session.query(text, params), PROBE_DEADLINE_MS)).rows as T[];
  }

  async close(): Promise<void> {
    this.down();
    await this.orm.close();
  }
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `host:port/database` of a URL, without its credentials, for logs and metrics. */
export function replicaName(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || 5432}${u.pathname}`;
}
