import type { Em } from "../platform/db/orm.ts";
import { type Disbursement, DisbursementEntity } from "./disbursement.entity.ts";
import { type Installment, InstallmentEntity } from "./installment.entity.ts";

/** Who a list asks for: a status as partners see it, and one user. */
export interface DisbursementFilter {
  status?: Disbursement["status"];
  userId?: string;
}

/** The status a partner asked for, as a condition on the stored row (an unanswered mandate past its time is CANCELLED). */
function shownAs(status: Disbursement["status"] | undefined, now: Date) {
  if (status === "AWAITING_ACCEPTANCE") return { status, acceptanceExpiresAt: { $gt: now } };
  if (status === "CANCELLED")
    return {
      $or: [
        { status },
        {
          status: "AWAITING_ACCEPTANCE" as const,
          $or: [{ acceptanceExpiresAt: { $lte: now } }, { acceptanceExpiresAt: null }],
        },
      ],
    };
  return status ? { status } : {};
}

/**
 * The disbursements list's reads (ListDisbursements): keyset pages of `em`'s tenant's rows, newest first by
 * id, over `disbursements_by_owner_id` (or `disbursements_by_owner_status`), so a page reads about `limit`
 * index entries whatever other tenants store.
 */
export const disbursementListRepository = {
  /** Up to `limit` of the tenant's disbursements older than `before`, newest first. */
  page(em: Em, filter: DisbursementFilter, now: Date, before: string | undefined, limit: number) {
    return em.find(
      DisbursementEntity,
      {
        $and: [
          shownAs(filter.status, now),
          filter.userId ? { userId: filter.userId } : {},
          before ? { id: { $lt: before } } : {},
        ],
      },
      { orderBy: { id: "desc" }, limit },
    );
  },

  /** The schedules of these disbursements (of the caller's tenant, found above), by disbursement, in order. */
  async schedules(em: Em, ids: string[]): Promise<Map<string, Installment[]>> {
    const byId = new Map<string, Installment[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return byId;
    const rows = await em.find(
      InstallmentEntity,
      { disbursementId: { $in: ids } },
      { orderBy: { disbursementId: "asc", seq: "asc" } },
    );
    for (const r of rows) byId.get(r.disbursementId)?.push(r);
    return byId;
  },
};
