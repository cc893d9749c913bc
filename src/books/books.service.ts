import { isCalendarDate } from "../platform/dates.ts";
import type { Em } from "../platform/db/orm.ts";
import { validationFailed } from "../platform/errors.ts";
import type { Tenant } from "../platform/tenancy.ts";
import type { BookEntry } from "./book-entry.entity.ts";
import { type BookKind, booksRepository as repo } from "./books.repository.ts";

export type { BookEntry, BookKind };

/** What {@link createBooksService} returns. */
export type BooksService = ReturnType<typeof createBooksService>;

/** The days the books answer for: PostgreSQL's timestamps cannot hold year 0, nor the day after 9999-12-31. */
const FIRST_DAY = "1970-01-01";
const LAST_DAY = "9999-12-30";

const dayStart = (day: string) => new Date(`${day}T00:00:00Z`);
const isDay = isCalendarDate;

/**
 * The partner's books (CONTRACT.md §6): principal out and fees at disbursement, repayments in, reversals
 * back, and repayments refunded when a payout was reversed after collections; amounts are signed kobo, so a
 * partner's net is the sum. Entries are written by the disbursement, repayment and refund services, in the
 * transaction of the change they record.
 */
export function createBooksService() {
  return {
    /** Deletes a partner's sandbox books entries (the sandbox reset), in the caller's transaction. */
    deleteSandbox(tx: Em, partnerId: string): Promise<number> {
      return repo.deletePartnerSandbox(tx, partnerId);
    },

    /** Books entries for a disbursement (and one of its installments), in the caller's transaction. */
    record(
      tx: Em,
      tenant: Tenant,
      at: Date,
      ref: { disbursementId: string; installmentId?: string },
      entries: [BookKind, bigint][],
    ): Promise<void> {
      return repo.insert(tx, tenant, ref.disbursementId, ref.installmentId ?? null, entries, at);
    },

    /**
     * Forgets the sandbox entries of sandbox disbursements being purged (SANDBOX_RETENTION_DAYS), in the
     * purge's transaction. The books of production money are kept forever.
     */
    forgetSandboxLoans(tx: Em, disbursementIds: string[]): Promise<number> {
      return repo.deleteSandboxOfLoans(tx, disbursementIds);
    },

    /** The caller's entries between two UTC dates (inclusive, either may be empty), with totals. */
    async list(em: Em, from: string, to: string) {
      const problems: Record<string, string> = {};
      for (const [name, day] of [
        ["from", from],
        ["to", to],
      ] as const)
        if (day && !(isDay(day) && day >= FIRST_DAY && day <= LAST_DAY))
          problems[name] = `must be a real date YYYY-MM-DD from ${FIRST_DAY} to ${LAST_DAY}`;
      if (!problems.from && !problems.to && from && to && from > to) problems.to = "must not be before from";
      if (Object.keys(problems).length) throw validationFailed(problems);
      const until = to ? new Date(dayStart(to).getTime() + 86_400_000) : undefined;
      const entries = await repo.list(em, from ? dayStart(from) : undefined, until);
      const sum = (...kinds: BookKind[]) =>
        entries.filter((e) => kinds.includes(e.kind)).reduce((s, e) => s + e.amountKobo, 0n);
      return {
        entries,
        // Net of reversals: a reversed payout's principal and fee come back.
        principalOutKobo: sum("PRINCIPAL_OUT", "PRINCIPAL_REVERSED"),
        feesKobo: sum("FEE", "FEE_REVERSED"),
        repaymentsInKobo: sum("REPAYMENT_IN"),
        // Repayments given back after their payout was reversed (negative).
        refundsKobo: sum("REPAYMENT_REFUND"),
        netKobo: entries.reduce((s, e) => s + e.amountKobo, 0n),
      };
    },
  };
}
