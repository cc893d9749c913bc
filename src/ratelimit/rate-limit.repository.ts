import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { BucketSpec } from "./limiters.service.ts";

/** The rate limit feature's table (rate_limit_buckets), reached only through its `rate_limit_take()` function. */
export const rateLimitRepository = {
  /**
   * Takes up to `want` tokens from a shared bucket, refilled first from the database clock, in one round trip
   * (it earns raw SQL: a stored function, so every instance sees one bucket whatever their own clocks say).
   */
  async take(
    em: Em,
    bucket: string,
    capacity: number,
    refillPerSecond: number,
    want: number,
  ): Promise<{ granted: number; remaining: number } | undefined> {
    // Its own transaction, committed without waiting for the WAL to reach the disk (for this commit only):
    // a take is made on the request's path, and an fsync queued behind a checkpoint held requests 100-200 ms.
    // A crash can lose the last fraction of a second of takes, giving those tokens back: at most a lease per
    // instance over the limit, once.
    const rows = await em
      .getConnection()
      .execute<{ granted: number; remaining: number }[]>(
        "select r.granted, r.remaining from set_config('synchronous_commit', 'off', true), rate_limit_take(?, ?, ?, ?) r",
        [bucket, capacity, refillPerSecond, want],
      );
    return rows[0];
  },

  /**
   * The same, on `em`'s transaction when it has one: for a limit checked inside a request's unit of work (an
   * idempotent POST runs in its transaction, where another pooled connection must not be taken). A token taken
   * by a request whose transaction rolls back is given back with it.
   */
  async takeWithin(
    em: Em,
    bucket: string,
    capacity: number,
    refillPerSecond: number,
    want: number,
  ): Promise<{ granted: number; remaining: number } | undefined> {
    const [row] = await sql<{ granted: number; remaining: number }>(
      em,
      "select granted, remaining from rate_limit_take($1::text, $2::float8, $3::float8, $4::int)",
      [bucket, capacity, refillPerSecond, want],
    );
    return row;
  },

  /**
   * Gives `n` tokens back to a bucket on `em`'s transaction when it has one, refilled first up to now (at most
   * to its capacity): for a token taken before the outcome was known, by an attempt that turned out not to be
   * what the bucket counts. A bucket with no row is full already.
   */
  async giveBack(em: Em, bucket: string, spec: BucketSpec, n: number): Promise<void> {
    await sql(
      em,
      `update rate_limit_buckets
          set tokens = least($2::float8,
                tokens + greatest(0, extract(epoch from (clock_timestamp() - refilled_at))) * $3::float8 + $4::float8),
              refilled_at = clock_timestamp()
        where bucket_key = $1`,
      [bucket, spec.capacity, spec.refillPerSecond, n],
    );
  },

  /** Fills a bucket again (a bucket with no row is full), on `em`'s transaction when it has one. */
  async fill(em: Em, bucket: string): Promise<void> {
    await sql(em, "delete from rate_limit_buckets where bucket_key = $1", [bucket]);
  },

  /**
   * Moves a shared bucket to new limits on `tx`'s transaction: it is first refilled up to now at the limits it
   * had, then held to the new capacity, so a lowered bucket never holds more than its new capacity and a raised
   * one does not gain the tokens it would have earned at the new rate before the change. A bucket not yet used
   * has no row: it starts full at the new capacity.
   */
  async settle(tx: Em, bucket: string, was: BucketSpec, now: BucketSpec): Promise<void> {
    await sql(
      tx,
      `update rate_limit_buckets
          set tokens = least($2::float8, least($3::float8,
                tokens + greatest(0, extract(epoch from (clock_timestamp() - refilled_at))) * $4::float8)),
              refilled_at = clock_timestamp()
        where bucket_key = $1`,
      [bucket, now.capacity, was.capacity, was.refillPerSecond],
    );
  },
};
