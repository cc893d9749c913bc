import type { ConsentService } from "../consent/consent.service.ts";
import type { PartnerService } from "../partners/partner.service.ts";
import { lagosDayStart, nextLagosMidnight } from "../platform/dates.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Metrics } from "../platform/metrics.ts";
import { pageOf, pageSize, unknownCursor } from "../platform/paging.ts";
import { traceCarrier } from "../platform/telemetry.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { PaymentInstrumentStore } from "../users/user.service.ts";
import type { BooksService } from "./books.service.ts";
import type { Disbursement } from "./disbursement.entity.ts";
import { lenderScope, disbursementRepository as repo } from "./disbursement.repository.ts";
import {
  type DisbursementFilter,
  disbursementListRepository as listRepo,
} from "./disbursement-list.repository.ts";
import { type DisbursementInput, validateDisbursement } from "./disbursement-validation.ts";
import { feeKobo } from "./fee.ts";
import type { Installment } from "./installment.entity.ts";
import type { MandateService } from "./mandate.service.ts";
import { createPayoutService, type PayoutDeps } from "./payout.service.ts";
import type { PaymentProvider } from "./provider.ts";
import { repaymentHistoryRepository as histories } from "./repayment-history.repository.ts";
import { createSandboxDisbursements } from "./sandbox-disbursements.ts";

export type { DisbursementInput } from "./disbursement-validation.ts";
export { COLLECT_QUEUE, PAYOUT_QUEUE } from "./mandate.service.ts";
export type { PastLoan } from "./sandbox-loans.repository.ts";
export type { Disbursement, Installment };

/** Debits run at 08:00 in Lagos (07:00 UTC) on the due date. */
export const DEBIT_HOUR_UTC = 7;

/** A disbursement as partners see it: its status now, its schedule and, while unanswered, its mandate page. */
export interface DisbursementView<I extends { dueDate: string; amountKobo: bigint } = Installment> {
  row: Disbursement;
  installments: I[];
  acceptanceUrl: string;
}

/** What {@link createDisbursementService} takes. */
export interface DisbursementDeps extends PayoutDeps {
  consents: ConsentService;
  partners: PartnerService;
  books: BooksService;
  instruments: PaymentInstrumentStore;
  mandates: MandateService;
  metrics?: Metrics;
  /**
   * DISBURSEMENTS_PER_USER_PER_DAY: the most disbursements a partner may create for one user in one
   * environment in one Lagos day (docs/rate-limits.md).
   */
  perUserPerDay: number;
}

/** What {@link createDisbursementService} returns. */
export type DisbursementService = ReturnType<typeof createDisbursementService>;

/** The payout and debit instruments a real provider needs on file: a payout is not started that could not be paid or repaid. */
async function checkInstruments(o: DisbursementDeps, tx: Em, input: DisbursementInput): Promise<void> {
  const onFile = await o.instruments.onFile(tx, input.userId);
  const missing: Record<string, string> = {};
  if (input.destination === "BANK" && !onFile.bank)
    missing.destination = "the user has no bank account on file for payouts; try WALLET";
  if (input.destination === "WALLET" && !onFile.wallet)
    missing.destination = "the user has no wallet on file for payouts; try BANK";
  if (!onFile.debit) missing.repaymentSchedule = "the user has no direct-debit authorisation on file";
  if (Object.keys(missing).length) throw validationFailed(missing);
}

/** The provider a create in `environment` would pay out through; `unavailable` when there is none. */
function providerForCreate(o: DisbursementDeps, environment: Environment): PaymentProvider {
  const provider = o.providers[environment];
  if (!provider || provider.environment !== environment) {
    throw new ApiError("unavailable", `No payment provider is configured for ${environment}.`);
  }
  return provider;
}

/** The refusal of a create past the per-user daily limit, with when to retry (midnight in Lagos). */
function dailyLimitReached(createdToday: number, limit: number, now: Date, dayEnds: Date): ApiError {
  return new ApiError(
    "user_daily_disbursement_limit",
    `You have created ${createdToday} disbursements for this user today (Lagos time), the most allowed ` +
      `(${limit}); retry after midnight in Lagos (${dayEnds.toISOString()}).`,
    {
      retryAfterSeconds: Math.max(1, Math.ceil((dayEnds.getTime() - now.getTime()) / 1000)),
      details: { limit, resetsAt: dayEnds.toISOString() },
    },
  );
}

/** A new disbursement's row, AWAITING_ACCEPTANCE, its fee fixed at the partner's rate, its mandate minted. */
function newDisbursement(
  o: DisbursementDeps,
  caller: Caller,
  input: DisbursementInput,
  now: Date,
  terms: { feeRateBps: number; provider: string },
): Disbursement {
  const id = newId("dsb");
  const mandate = o.mandates.mint(id);
  return {
    id,
    partnerId: caller.partnerId,
    environment: caller.environment,
    userId: input.userId,
    status: "AWAITING_ACCEPTANCE",
    principalKobo: input.principalKobo,
    feeKobo: feeKobo(input.principalKobo, terms.feeRateBps),
    feeRateBps: terms.feeRateBps,
    destination: input.destination as "WALLET" | "BANK",
    reference: input.reference,
    scheduleAcceptedAt: null,
    failureReason: null,
    provider: terms.provider,
    createdAt: now,
    processingAt: null,
    deliveredAt: null,
    failedAt: null,
    reversedAt: null,
    traceParent: traceCarrier().traceparent ?? null,
    acceptanceTokenHash: mandate.tokenHash,
    acceptanceTokenEnc: mandate.tokenEnc,
    acceptanceExpiresAt: o.mandates.expiresAt(
      now,
      input.acceptanceExpiresInHours,
      input.installments[0]?.dueDate,
    ),
    acceptanceMethod: null,
    acceptedSchedule: null,
    acceptedTotalKobo: null,
    acceptanceEvidenceEnc: null,
    acceptanceTermsHash: null,
    cancelledAt: null,
  };
}

/**
 * Creates a disbursement AWAITING_ACCEPTANCE in `tx`, the transaction that stores the request's idempotency
 * record (see {@link createDisbursementService}'s `create`).
 */
async function create(
  o: DisbursementDeps,
  tx: Em,
  caller: Caller,
  input: DisbursementInput,
  perUserPerDay: number,
): Promise<DisbursementView<{ dueDate: string; amountKobo: bigint }>> {
  // The handler passes the idempotent write's transaction (platform/rpc/context.ts idempotentTxOf).
  if (!tx.isInTransaction())
    throw new Error("a disbursement is created in its idempotency record's transaction");
  const now = o.clock.now();
  const checkHours = (hours: number) => o.mandates.expiresAt(now, hours);
  validateDisbursement(input, now, checkHours);
  const provider = providerForCreate(o, caller.environment);
  o.mandates.assertCanAsk(caller.environment);
  await o.consents.assertActive(tx, caller, input.userId);
  const terms = await o.partners.lendingTerms(tx, caller.partnerId);
  validateDisbursement(input, now, checkHours, terms);
  if (provider.needsInstruments) await checkInstruments(o, tx, input);
  // The per-user daily limit, counted in this transaction under a lock on (partner, environment, user), so
  // concurrent creates at the limit admit exactly the limit. A replay never reaches here: it is answered
  // from its idempotency record before the write runs.
  const day = { from: lagosDayStart(now), until: nextLagosMidnight(now) };
  await repo.lockUserDay(tx, caller, input.userId);
  const row = newDisbursement(o, caller, input, now, {
    feeRateBps: terms.feeRateBps,
    provider: provider.name,
  });
  const written = await repo.insertCounted(tx, row, input.installments, {
    day,
    limit: perUserPerDay,
    debitHourUtc: DEBIT_HOUR_UTC,
  });
  if (written.createdToday >= perUserPerDay) {
    o.metrics?.expensiveLimitRejections.inc({ limit: "user_daily_disbursements" });
    throw dailyLimitReached(written.createdToday, perUserPerDay, now, day.until);
  }
  if (!written.inserted)
    throw new ApiError("conflict", `Reference ${input.reference} is already used by another disbursement.`);
  return { row, installments: input.installments, acceptanceUrl: o.mandates.acceptanceUrl(row) };
}

/**
 * Disbursements (CONTRACT.md §6). A create is written, fee fixed, in the transaction that also stores the
 * idempotency record; the person's acceptance of its mandate queues the payout, which moves it PENDING →
 * PROCESSING → DELIVERED (or FAILED) through the payout service. The sandbox's own helpers are in
 * sandbox-disbursements.ts.
 */
export function createDisbursementService(o: DisbursementDeps) {
  const payouts = createPayoutService(o);
  const sandbox = createSandboxDisbursements({ books: o.books, payouts });
  /** A disbursement of `em`'s tenant as partners see it now, with its schedule. */
  const view = (row: Disbursement, installments: Installment[]): DisbursementView => ({
    row: o.mandates.current(row),
    installments,
    acceptanceUrl: o.mandates.acceptanceUrl(row),
  });
  return {
    ...payouts,
    ...sandbox,

    /**
     * Creates a disbursement AWAITING_ACCEPTANCE, inside the transaction that stores the request's
     * idempotency record: the edge opens one only for a request with an `Idempotency-Key` (CONTRACT.md §6: a
     * payout is never started without a key to retry it safely with). Nothing is queued: the person's
     * acceptance on the mandate page starts the payout and schedules the debits. `perUserPerDay`: the
     * caller's partner's own limit (dedicated capacity), else DISBURSEMENTS_PER_USER_PER_DAY.
     */
    create: (tx: Em, caller: Caller, input: DisbursementInput, perUserPerDay = o.perUserPerDay) =>
      create(o, tx, caller, input, perUserPerDay),

    /** A disbursement of the caller's, as it is now, with its schedule. */
    async get(em: Em, id: string): Promise<DisbursementView> {
      const row = isId("dsb", id) ? await repo.find(em, id) : null;
      if (!row) throw new ApiError("not_found", `No disbursement ${id}.`);
      return view(row, await repo.schedule(em, id));
    },

    /**
     * A page of the caller's disbursements, newest first, each as {@link get} shows it, after
     * `startingAfter` (one of the caller's own), filtered by status as shown and by user when asked.
     */
    async list(em: Em, filter: DisbursementFilter, page: { limit: number; startingAfter: string }) {
      if (page.startingAfter && !(await repo.find(em, page.startingAfter)))
        throw unknownCursor("disbursements");
      const limit = pageSize(page.limit);
      const rows = await listRepo.page(em, filter, o.clock.now(), page.startingAfter || undefined, limit + 1);
      const { items, hasMore } = pageOf(rows, limit);
      const schedules = await listRepo.schedules(
        em,
        items.map((r) => r.id),
      );
      return { items: items.map((row) => view(row, schedules.get(row.id) ?? [])), hasMore };
    },

    /** A disbursement of the environment, for the provider's webhook (which names it by our reference). */
    async byId(em: Em, environment: Environment, id: string): Promise<Disbursement | undefined> {
      if (!isId("dsb", id)) return undefined;
      return (await repo.findInEnvironment(em, environment, id)) ?? undefined;
    },

    /** Recomputes a user's repayment history roll-ups in the lender scope of a loan of theirs. */
    refreshHistory(
      tx: Em,
      loan: { userId: string; environment: Environment; partnerId: string },
    ): Promise<void> {
      return histories.refresh(tx, loan.userId, lenderScope(loan));
    },
  };
}
