import type { Em } from "../platform/db/orm.ts";

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
};
