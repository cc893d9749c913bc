import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { addDays, isCalendarDate } from "../platform/dates.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { type Tenant, tenantOf } from "../platform/tenancy.ts";
import type { BookEntry } from "./book-entry.entity.ts";
import { type BookKind, booksRepository as repo } from "./books.repository.ts";

export type { BookEntry, BookKind };

/** What {@link createBooksService} returns. */
export type BooksService = ReturnType<typeof createBooksService>;

/** The days the books answer for: PostgreSQL's timestamps cannot hold year 0, nor the day after 9999-12-31. */
const FIRST_DAY = "1970-01-01";
const LAST_DAY = "9999-12-30";

const dayStart = (day: string) => new Date(`${day}T00:00:00Z`);

/** The longest period of a series, in days (a year, a leap year's included). */
const MAX_SERIES_DAYS = 366;

/** Lagos is UTC+1 all year: a series' days are Lagos days. */
const LAGOS_OFFSET_MS = 3_600_000;

/** One day of a series: the day's sums, netted as the books' totals are. */
export interface BooksDay {
  date: string;
  principalOutKobo: bigint;
  feesKobo: bigint;
  repaymentsInKobo: bigint;
  refundsKobo: bigint;
  netKobo: bigint;
}

/** The contract's sums of a set of entries' totals per kind (CONTRACT.md §6). */
function netted(totals: Map<BookKind, bigint>): Omit<BooksDay, "date"> {
  const sum = (...kinds: BookKind[]) => kinds.reduce((s, k) => s + (totals.get(k) ?? 0n), 0n);
  return {
    // Net of reversals: a reversed payout's principal and fee come back.
    principalOutKobo: sum("PRINCIPAL_OUT", "PRINCIPAL_REVERSED"),
    feesKobo: sum("FEE", "FEE_REVERSED"),
    repaymentsInKobo: sum("REPAYMENT_IN"),
    // Repayments given back after their payout was reversed (negative).
    refundsKobo: sum("REPAYMENT_REFUND"),
    netKobo: [...totals.values()].reduce((s, v) => s + v, 0n),
  };
}

/** What is wrong with a period's days (`required`: both must be given), by field. */
function periodProblems(from: string, to: string, required: boolean): Record<string, string> {
  const problems: Record<string, string> = {};
  for (const [name, day] of [
    ["from", from],
    ["to", to],
  ] as const)
    if ((day || required) && !(isCalendarDate(day) && day >= FIRST_DAY && day <= LAST_DAY))
      problems[name] = `must be a real date YYYY-MM-DD from ${FIRST_DAY} to ${LAST_DAY}`;
  if (!problems.from && !problems.to && from && to && from > to) problems.to = "must not be before from";
  return problems;
}

/** Entries per page: 100 unless asked, 1,000 at most. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1_000;

/**
 * The caller's books per Lagos day from `from` to `to` (inclusive, at most {@link MAX_SERIES_DAYS}), every
 * day listed, netted as {@link listEntries} nets its totals.
 */
async function series(em: Em, from: string, to: string): Promise<BooksDay[]> {
  const problems = periodProblems(from, to, true);
  // Counted in days, not by comparing day strings: a year past 9999 is written "+010000-…", before "9999".
  const span = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000 + 1;
  if (!problems.from && !problems.to && span > MAX_SERIES_DAYS)
    problems.to = `must be at most ${MAX_SERIES_DAYS} days from from`;
  if (Object.keys(problems).length) throw validationFailed(problems);
  const start = new Date(Date.parse(`${from}T00:00:00Z`) - LAGOS_OFFSET_MS);
  const until = new Date(Date.parse(`${addDays(to, 1)}T00:00:00Z`) - LAGOS_OFFSET_MS);
  const sums = new Map<string, Map<BookKind, bigint>>();
  for (const r of await repo.daily(em, tenantOf(em), start, until)) {
    const day = sums.get(r.day) ?? new Map<BookKind, bigint>();
    day.set(r.kind, BigInt(r.total));
    sums.set(r.day, day);
  }
  const days: BooksDay[] = [];
  for (let day = from; day <= to; day = addDays(day, 1)) {
    const totals = sums.get(day) ?? new Map<BookKind, bigint>();
    days.push({ date: day, ...netted(totals) });
  }
  return days;
}

/** The position a sealed cursor names (a booking time and an internal id); 400 when it is not this period's. */
function openCursor(box: SecretBox, cursor: string, aad: string): { at: Date; id: bigint } {
  try {
    const [at, id] = JSON.parse(box.open(Buffer.from(cursor, "base64url"), aad).toString("utf8"));
    return { at: new Date(at), id: BigInt(id) };
  } catch {
    throw new ApiError(
      "invalid_argument",
      "starting_after is not a cursor of this period's books: pass next_starting_after as it came.",
    );
  }
}

/**
 * One page of the caller's entries between two UTC dates (inclusive, either may be empty), with the totals of
 * the whole period. The cursor is sealed (it names a booking time and an internal id, neither of which a
 * partner should read) and bound to the tenant and the period.
 */
async function listEntries(
  box: SecretBox,
  em: Em,
  from: string,
  to: string,
  page: { limit: number; startingAfter: string },
) {
  const problems = periodProblems(from, to, false);
  if (page.limit !== 0 && (!Number.isInteger(page.limit) || page.limit < 1 || page.limit > MAX_PAGE))
    problems.limit = `must be 1 to ${MAX_PAGE}`;
  if (Object.keys(problems).length) throw validationFailed(problems);
  const tenant = tenantOf(em);
  const aad = `books-cursor:${tenant.partnerId}:${tenant.environment}:${from}:${to}`;
  const after = page.startingAfter ? openCursor(box, page.startingAfter, aad) : undefined;
  const limit = page.limit || DEFAULT_PAGE;
  const start = from ? dayStart(from) : undefined;
  const until = to ? new Date(dayStart(to).getTime() + 86_400_000) : undefined;
  const rows = await repo.page(em, start, until, after, limit + 1);
  const entries = rows.slice(0, limit);
  const last = entries.at(-1);
  const hasMore = rows.length > limit && last !== undefined;
  const nextStartingAfter = hasMore
    ? box
        .seal(Buffer.from(JSON.stringify([last.bookedAt.getTime(), last.id.toString()])), aad)
        .toString("base64url")
    : "";
  const totals = await repo.totals(em, tenant, start, until);
  return { entries, hasMore, nextStartingAfter, ...netted(totals) };
}

/**
 * The partner's books (CONTRACT.md §6): principal out and fees at disbursement, repayments in, reversals
 * back, and repayments refunded when a payout was reversed after collections; amounts are signed kobo, so a
 * partner's net is the sum. Entries are written by the disbursement, repayment and refund services, in the
 * transaction of the change they record.
 */
export function createBooksService({ box }: { box: SecretBox }) {
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

    /** The caller's books per Lagos day (see {@link series}). */
    series,

    /** One page of the caller's entries, with the period's totals (see {@link listEntries}). */
    list: (em: Em, from: string, to: string, page: { limit: number; startingAfter: string }) =>
      listEntries(box, em, from, to, page),
  };
}
