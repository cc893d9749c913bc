import type { Em } from "./orm.ts";
import { sql } from "./sql.ts";

/** A position in PostgreSQL's write-ahead log (`pg_lsn`, written `16/B374D848`), as a number that orders. */
export type Lsn = bigint;

/** Parses PostgreSQL's text form of a `pg_lsn`. */
export function parseLsn(text: string): Lsn {
  const m = /^([0-9A-F]{1,8})\/([0-9A-F]{1,8})$/i.exec(text);
  if (!m) throw new Error(`not a WAL position: ${text}`);
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

/** The text form PostgreSQL reads back as a `pg_lsn`. */
export function formatLsn(lsn: Lsn): string {
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}

/**
 * The primary's WAL position, asked for on behalf of reads that must see everything committed before they
 * began. A read may share an answer only with a question asked after it began: at most one question is on its
 * way at a time, and every read that arrives meanwhile waits for the next one, which starts when the first
 * answers. Under a thousand concurrent reads that is two round trips in flight, not a thousand.
 *
 * `pg_current_wal_flush_lsn()` is the position flushed to disk, which every transaction that has told its client
 * it committed has reached (a commit waits for its record's flush); only what is flushed is streamed to
 * replicas. A transaction committed with `synchronous_commit = off` (the rate limiter's token takes) may be later,
 * and no read waits for those: asking for the position written (`pg_current_wal_lsn()`) would make reads wait
 * up to `wal_writer_delay` for them.
 */
export class PrimaryPosition {
  #inFlight: Promise<Lsn> | undefined;
  #next: Promise<Lsn> | undefined;
  readonly #ask: (em: Em) => Promise<Lsn>;

  constructor(ask: (em: Em) => Promise<Lsn> = currentLsn) {
    this.#ask = ask;
  }

  /** A WAL position of the primary read after this call began. */
  after(em: Em): Promise<Lsn> {
    if (!this.#inFlight) return this.#start(em);
    this.#next ??= this.#inFlight.then(
      () => this.#start(em),
      () => this.#start(em),
    );
    return this.#next;
  }

  #start(em: Em): Promise<Lsn> {
    this.#next = undefined;
    const asked = this.#ask(em);
    this.#inFlight = asked;
    const done = () => {
      if (this.#inFlight === asked) this.#inFlight = undefined;
    };
    asked.then(done, done);
    return asked;
  }
}

/** The primary's current WAL position, on `em`'s pool. */
export async function currentLsn(em: Em): Promise<Lsn> {
  // Prepared (where the pool allows): asked for every few reads, its parsing and planning would cost the primary
  // more than running it.
  const [row] = await sql<{ lsn: string }>(em, "select pg_current_wal_flush_lsn()::text as lsn", [], {
    prepare: true,
  });
  if (!row) throw new Error("pg_current_wal_flush_lsn() returned no row");
  return parseLsn(row.lsn);
}
