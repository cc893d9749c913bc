import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/entities.ts";
import { createOrm, type Orm } from "../../src/platform/db/orm.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createKeyedBuckets } from "../../src/ratelimit/keyed-buckets.ts";
import { rateLimitBucketsPurge } from "../../src/ratelimit/rate-limit-retention.repository.ts";
import { createTestDatabase } from "../support/db.ts";

// Buckets keyed by what strangers send (an address, an email digest) on the shared `rate_limit_buckets`:
// taken, given back and filled on a real PostgreSQL, and purged once full again so that keys met once are
// not kept.
const logger = createLogger({ level: "warn", write: (line) => process.stderr.write(`${line}\n`) });
let orm: Orm;
beforeAll(async () => {
  orm = await createOrm({ databaseUrl: await createTestDatabase(), schema, poolSize: 2, logger });
});
afterAll(() => orm?.close());

const em = () => orm.em.fork();
const keys = async () =>
  (await sql<{ bucket_key: string }>(em(), "select bucket_key from rate_limit_buckets order by 1")).map(
    (r) => r.bucket_key,
  );

describe("keyed buckets", () => {
  it("hold a key to its capacity, give back and fill again, each key apart", async () => {
    const family = createKeyedBuckets("test-kind", { capacity: 2, refillPerSecond: 0.001 });
    const take = async (key: string) => (await family.take(em(), key)).allowed;
    expect([await take("a"), await take("a"), await take("a"), await take("b")]).toEqual([
      true,
      true,
      false,
      true,
    ]);
    const refused = await family.take(em(), "a");
    expect(refused.allowed).toBe(false);
    // A token a second at 0.001 a second: the next one is about 1000 s away.
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBeGreaterThan(900);
    await family.giveBack(em(), "a");
    expect([await take("a"), await take("a")]).toEqual([true, false]);
    await family.fill(em(), "a");
    expect([await take("a"), await take("a"), await take("a")]).toEqual([true, true, false]);
  });

  it("are purged once idle long enough to be full again, and no other bucket is", async () => {
    const quick = createKeyedBuckets("purge-quick", { capacity: 1, refillPerSecond: 1 });
    const slow = createKeyedBuckets("purge-slow", { capacity: 10, refillPerSecond: 0.01 });
    await quick.take(em(), "x");
    await slow.take(em(), "y");
    await sql(em(), "insert into rate_limit_buckets values ('read:key_1', 3, now() - interval '1 day')");
    const purge = rateLimitBucketsPurge([quick, slow]);
    const run = (at: Date) => em().transactional((tx) => purge.batch(tx, at, 100));
    // Now: both were just used.
    expect((await run(new Date())).picked).toBe(0);
    // Two seconds on: the quick one is full again (1 token, 1 a second), the slow one needs 1000 s.
    expect((await run(new Date(Date.now() + 2_000))).deleted).toEqual({ rate_limit_buckets: 1 });
    expect(await keys()).toEqual(expect.arrayContaining(["purge-slow:y", "read:key_1"]));
    expect(await keys()).not.toContain("purge-quick:x");
    expect((await run(new Date(Date.now() + 1_001_000))).deleted).toEqual({ rate_limit_buckets: 1 });
    // A per-key bucket is not the purge's to judge, however old.
    expect(await keys()).toContain("read:key_1");
    expect(await keys()).not.toContain("purge-slow:y");
  });
});
