import { deleteCounted } from "../platform/db/purge.ts";
import type { PurgeBatch, PurgeStep } from "../retention/retention.service.ts";

/**
 * The consent feature's retention (docs/operations.md "Retention"): consent links that ended before the
 * cut-off, decided (ACCEPTED, DECLINED) at `decided_at`, else (LOCKED, or PENDING and so EXPIRED) at
 * `expires_at`. A PENDING link not yet expired has not ended. Nothing references a link; the consent an
 * accepted link granted, with its evidence, is kept.
 */
export const consentLinksPurge: PurgeStep = {
  name: "consent links",
  retention: "default",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    // The expression of `consent_links_by_end`, so the search is an index range.
    const deleted = await deleteCounted(
      tx,
      `delete from consent_links where id in (
         select id from consent_links where coalesce(decided_at, expires_at) < $1
          limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    return { picked: deleted, deleted: { consent_links: deleted } };
  },
};
