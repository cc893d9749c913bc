import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";

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
    const rows = await em
      .getConnection()
      .execute<{ granted: number; remaining: number }[]>("select * from rate_limit_take(?, ?, ?, ?)", [
        bucket,
        capacity,
        refillPerSecond,
        want,
      ]);
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
};
