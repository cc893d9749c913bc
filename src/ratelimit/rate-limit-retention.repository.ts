import { deleteCounted } from "../platform/db/purge.ts";
import type { PurgeBatch, PurgeStep } from "../retention/retention.service.ts";
import type { KeyedBuckets } from "./keyed-buckets.ts";

/**
 * Buckets of the given families that have been idle long enough to be full again, which is what a missing row
 * means too: so a family keyed by what strangers send (client addresses, emails) keeps a row only while it
 * holds something back. The cut-off is the run's now.
 *
 * It scans the table rather than an index: the table is small (a row per API key and class, and these), the
 * purge runs hourly, and an index on `refilled_at` would turn every take on the per-key buckets, the hottest
 * rows of the service, into an update that must touch the index too.
 */
export function rateLimitBucketsPurge(families: readonly KeyedBuckets[]): PurgeStep {
  const prefixes = families.map((f) => `${f.kind}:`);
  const seconds = families.map((f) => f.fullAfterSeconds);
  return {
    name: "rate-limit buckets full again",
    retention: "now",
    async batch(tx, cutoff, limit): Promise<PurgeBatch> {
      const deleted = await deleteCounted(
        tx,
        `delete from rate_limit_buckets where bucket_key in (
           select b.bucket_key
             from rate_limit_buckets b
             join unnest($1::text[], $2::float8[]) f(prefix, full_seconds) on starts_with(b.bucket_key, f.prefix)
            where b.refilled_at < $3::timestamptz - make_interval(secs => f.full_seconds)
            limit $4 for update of b skip locked)
         returning 1`,
        [prefixes, seconds, cutoff, limit],
      );
      return { picked: deleted, deleted: { rate_limit_buckets: deleted } };
    },
  };
}
