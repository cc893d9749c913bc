import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Tenant } from "../platform/tenancy.ts";
import { type BookEntry, BookEntryEntity } from "./book-entry.entity.ts";

/** A kind of book entry (CONTRACT.md §6). */
export type BookKind = BookEntry["kind"];

/** The books feature's table (book_entries): the only code that reads or writes it. */
export const booksRepository = {
  /** Deletes a partner's sandbox books entries (the sandbox reset). */
  async deletePartnerSandbox(tx: Em, partnerId: string): Promise<number> {
    const rows = await sql(
      tx,
      "delete from book_entries where partner_id = $1 and environment = 'sandbox' returning id",
      [partnerId],
    );
    return rows.length;
  },

  /** Writes entries for one disbursement of a tenant (and one installment, for a repayment), in one statement. */
  async insert(
    em: Em,
    tenant: Tenant,
    disbursementId: string,
    installmentId: string | null,
    entries: [BookKind, bigint][],
    at: Date,
  ): Promise<void> {
    if (entries.length === 0) return;
    await sql(
      em,
      `insert into book_entries (partner_id, environment, disbursement_id, installment_id, kind, amount_kobo, booked_at)
       select $1, $2, $3, $4, k, a, $7 from unnest($5::text[], $6::bigint[]) as t (k, a)`,
      [
        tenant.partnerId,
        tenant.environment,
        disbursementId,
        installmentId,
        entries.map(([k]) => k),
        entries.map(([, a]) => a.toString()),
        at,
      ],
    );
  },

  /**
   * Deletes the sandbox entries of these disbursements (the retention of sandbox loans); production entries
   * are never deleted, whatever ids are given. Returns how many.
   */
  async deleteSandboxOfLoans(tx: Em, disbursementIds: string[]): Promise<number> {
    if (disbursementIds.length === 0) return 0;
    const [row] = await sql<{ n: number }>(
      tx,
      `with gone as (delete from book_entries
                      where disbursement_id = any($1::text[]) and environment = 'sandbox' returning 1)
       select count(*)::int as n from gone`,
      [disbursementIds],
    );
    return row?.n ?? 0;
  },

  /**
   * Up to `limit` of `em`'s tenant's entries booked in [from, to) (either end open) after `after` (a
   * booking time and id), in booking order.
   */
  page(
    em: Em,
    from: Date | undefined,
    to: Date | undefined,
    after: { at: Date; id: bigint } | undefined,
    limit: number,
  ): Promise<BookEntry[]> {
    const bookedAt = { ...(from ? { $gte: from } : {}), ...(to ? { $lt: to } : {}) };
    const period = from || to ? { bookedAt } : {};
    const where = after
      ? {
          $and: [
            period,
            { $or: [{ bookedAt: { $gt: after.at } }, { bookedAt: after.at, id: { $gt: after.id } }] },
          ],
        }
      : period;
    return em.find(BookEntryEntity, where, { orderBy: { bookedAt: "asc", id: "asc" }, limit });
  },

  /**
   * The sums per Lagos day (UTC+1 all year) and kind of a tenant's entries booked in [from, to): one range
   * scan of `book_entries_by_owner`, so the cost is the period's own entries, whatever others store.
   */
  async daily(em: Em, tenant: Tenant, from: Date, to: Date) {
    return sql<{ day: string; kind: BookKind; total: string }>(
      em,
      `select to_char((booked_at at time zone 'UTC') + interval '1 hour', 'YYYY-MM-DD') as day, kind,
              sum(amount_kobo)::text as total
         from book_entries
        where partner_id = $1 and environment = $2 and booked_at >= $3 and booked_at < $4
        group by 1, 2`,
      [tenant.partnerId, tenant.environment, from, to],
    );
  },

  /** The sums per kind of a tenant's entries booked in [from, to) (either end open): one indexed pass. */
  async totals(em: Em, tenant: Tenant, from: Date | undefined, to: Date | undefined) {
    const rows = await sql<{ kind: BookKind; total: string }>(
      em,
      `select kind, sum(amount_kobo)::text as total from book_entries
        where partner_id = $1 and environment = $2
          and ($3::timestamptz is null or booked_at >= $3) and ($4::timestamptz is null or booked_at < $4)
        group by kind`,
      [tenant.partnerId, tenant.environment, from ?? null, to ?? null],
    );
    return new Map(rows.map((r) => [r.kind, BigInt(r.total)]));
  },
};
