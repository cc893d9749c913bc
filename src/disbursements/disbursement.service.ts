import type { BookKind, BooksService } from "../books/books.service.ts";
import type { ConsentService } from "../consent/consent.service.ts";
import {
  type LendingTerms,
  MAX_TENOR_DAYS_CEILING,
  type PartnerService,
} from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { addDays, isCalendarDate, lagosDay, lagosDayStart, nextLagosMidnight } from "../platform/dates.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { failpoint } from "../platform/failpoints.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { pageOf, pageSize, unknownCursor } from "../platform/paging.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { PaymentInstrumentStore } from "../users/payment-instruments.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { Disbursement } from "./disbursement.entity.ts";
import { lenderScope, disbursementRepository as repo } from "./disbursement.repository.ts";
import {
  type DisbursementFilter,
  disbursementListRepository as listRepo,
} from "./disbursement-list.repository.ts";
import { feeKobo } from "./fee.ts";
import type { Installment } from "./installment.entity.ts";
import type { MandateService } from "./mandate.service.ts";
import type { PaymentProvider, TransferOutcome } from "./provider.ts";
import { refundRepository } from "./refund.repository.ts";
import { REFUND_QUEUE } from "./refund.service.ts";

export { COLLECT_QUEUE, PAYOUT_QUEUE } from "./mandate.service.ts";
/** Debits run at 08:00 in Lagos (07:00 UTC) on the due date. */
export const DEBIT_HOUR_UTC = 7;

export type { Disbursement, Installment };

/** A loan that ended before the service knew the user (sandbox fixtures). */
export interface PastLoan {
  id: string;
  partnerId: string;
  userId: string;
  principalKobo: bigint;
  deliveredAt: Date;
  installments: {
    id: string;
    dueDate: string;
    amountKobo: bigint;
    collectedAt: Date | null;
    attempts: number;
    lastFailure: string | null;
    failedAt: Date | null;
  }[];
}

/** What CreateDisbursement takes. */
export interface DisbursementInput {
  userId: string;
  principalKobo: bigint;
  destination: "WALLET" | "BANK" | undefined;
  reference: string;
  installments: { dueDate: string; amountKobo: bigint }[];
  /** How long the person has to answer the mandate (0: the default, 24). */
  acceptanceExpiresInHours: number;
}

/** A disbursement as partners see it: its status now, its schedule and, while unanswered, its mandate page. */
export interface DisbursementView<I extends { dueDate: string; amountKobo: bigint } = Installment> {
  row: Disbursement;
  installments: I[];
  acceptanceUrl: string;
}

const MAX_PRINCIPAL = 1_000_000_000_000n;
const REFERENCE = /^[\x21-\x7e]{1,64}$/;

/** What {@link createDisbursementService} returns. */
export type DisbursementService = ReturnType<typeof createDisbursementService>;

/**
 * Disbursements (CONTRACT.md §6). A create is written, fee fixed, with its payout job in the transaction
 * that also stores the idempotency record; the payout job moves it PENDING → PROCESSING → DELIVERED (or
 * FAILED), asking the provider by our id, so a retried or crashed job never pays twice.
 */
export function createDisbursementService(o: {
  clock: Clock;
  consents: ConsentService;
  partners: PartnerService;
  books: BooksService;
  outbox: Outbox;
  /** The provider per environment; production has none until the HTTP adapter is configured. */
  providers: Partial<Record<Environment, PaymentProvider>>;
  instruments: PaymentInstrumentStore;
  mandates: MandateService;
  /** Queues the refunds a reversal owes, in the reversal's transaction. */
  jobs: Jobs;
  logger: Logger;
  metrics?: Metrics;
  /** How long an attempt holds a PROCESSING payout (PAYOUT_RESUME_AFTER_MS; longer than a provider call). */
  leaseMs: number;
  /**
   * DISBURSEMENTS_PER_USER_PER_DAY: the most disbursements a partner may create for one user in one
   * environment in one Lagos day (docs/rate-limits.md).
   */
  perUserPerDay: number;
}) {
  const { clock, outbox } = o;

  /**
   * The request's own shape, then the bounds that hold even for a schedule the person accepts (CONTRACT.md
   * §6): real dates, the first from tomorrow in Lagos, the last within the partner's tenor, and a total
   * repayable within the partner's cost cap.
   */
  const validate = (input: DisbursementInput, now: Date, terms?: LendingTerms) => {
    const problems: Record<string, string> = {};
    if (input.principalKobo <= 0n || input.principalKobo > MAX_PRINCIPAL)
      problems.principalKobo = "must be 1 to 1000000000000 kobo";
    if (!input.destination) problems.destination = "must be WALLET or BANK";
    if (!REFERENCE.test(input.reference)) problems.reference = "must be 1 to 64 visible ASCII characters";
    try {
      o.mandates.expiresAt(now, input.acceptanceExpiresInHours);
    } catch {
      problems.acceptanceExpiresInHours = "must be 1 to 168 (hours)";
    }
    const today = lagosDay(now);
    // Without the partner's terms (the check before any query), the longest tenor any partner may have.
    const tenorDays = terms?.maxTenorDays ?? MAX_TENOR_DAYS_CEILING;
    const lastAllowed = addDays(today, tenorDays);
    if (input.installments.length < 1 || input.installments.length > 60)
      problems.repaymentSchedule = "must have 1 to 60 installments";
    let previous = today;
    let total = 0n;
    // Past 60, the count is the answer: the rest is not checked (nor listed back, however many were sent).
    const checked = input.installments.length > 60 ? [] : input.installments;
    checked.forEach((inst, i) => {
      const at = `repaymentSchedule.installments[${i}]`;
      if (!isCalendarDate(inst.dueDate)) problems[`${at}.dueDate`] = "must be a real date YYYY-MM-DD";
      else if (inst.dueDate <= previous)
        problems[`${at}.dueDate`] =
          i === 0
            ? `must be tomorrow (${addDays(today, 1)}, Lagos time) or later`
            : "must be after the previous installment";
      else if (inst.dueDate > lastAllowed)
        problems[`${at}.dueDate`] =
          `must be on or before ${lastAllowed}, ${tenorDays} days from today (${terms ? "the partner's tenor" : "the longest tenor allowed"})`;
      else previous = inst.dueDate;
      if (inst.amountKobo <= 0n) problems[`${at}.amountKobo`] = "must be positive";
      else total += inst.amountKobo;
    });
    // total ≤ principal × (1 + maxCostBps / 10 000), in integers.
    const maxCostBps = BigInt(terms?.maxCostBps ?? 5_000);
    if (
      terms &&
      !problems.principalKobo &&
      total * 10_000n > input.principalKobo * (10_000n + maxCostBps) &&
      !Object.keys(problems).some((k) => k.endsWith("amountKobo"))
    ) {
      const cap = (input.principalKobo * (10_000n + maxCostBps)) / 10_000n;
      problems.repaymentSchedule = `the total repayable (${total} kobo) may not exceed ${cap} kobo: the principal plus the partner's cap of ${maxCostBps} basis points`;
    }
    if (Object.keys(problems).length) throw validationFailed(problems);
  };

  /**
   * The provider of an environment. Each provider serves exactly one environment, and this is the only way
   * to reach one: a sandbox disbursement can never reach the real provider, nor a live one the simulator.
   */
  const providerOf = (environment: Environment): PaymentProvider => {
    const provider = o.providers[environment];
    if (!provider || provider.environment !== environment)
      throw new Error(`no payment provider for ${environment}`);
    return provider;
  };

  /** A sandbox disbursement of the caller's, locked until the transaction ends. */
  const lockedInSandbox = async (tx: Em, id: string): Promise<Disbursement> => {
    const row = isId("dsb", id) ? await repo.findLocked(tx, id) : null;
    if (!row) throw new ApiError("not_found", `No disbursement ${id}.`);
    if (row.environment !== "sandbox") throw new ApiError("sandbox_only");
    return row;
  };

  const book = (tx: Em, d: Disbursement, entries: [BookKind, bigint][]) =>
    o.books.record(tx, d, clock.now(), { disbursementId: d.id }, entries);

  return {
    /**
     * Creates a disbursement AWAITING_ACCEPTANCE, inside the transaction that stores the request's
     * idempotency record: the edge opens one only for a request with an `Idempotency-Key` (CONTRACT.md §6: a
     * payout is never started without a key to retry it safely with). Nothing is queued: the person's
     * acceptance on the mandate page starts the payout and schedules the debits.
     */
    async create(
      tx: Em,
      caller: Caller,
      input: DisbursementInput,
      /** The caller's partner's own limit (dedicated capacity), else DISBURSEMENTS_PER_USER_PER_DAY. */
      perUserPerDay = o.perUserPerDay,
    ): Promise<DisbursementView<{ dueDate: string; amountKobo: bigint }>> {
      if (!tx.isInTransaction()) throw new ApiError("idempotency_key_required");
      const now = clock.now();
      validate(input, now);
      const provider = o.providers[caller.environment];
      if (provider?.environment !== caller.environment) {
        throw new ApiError("unavailable", `No payment provider is configured for ${caller.environment}.`);
      }
      o.mandates.assertCanAsk(caller.environment);
      await o.consents.assertActive(tx, caller, input.userId);
      const terms = await o.partners.lendingTerms(tx, caller.partnerId);
      validate(input, now, terms);
      const rate = terms.feeRateBps;
      if (provider.needsInstruments) {
        // The platform's instruments for the user: a payout is not started that could not be paid or repaid.
        const onFile = await o.instruments.onFile(tx, input.userId);
        const missing: Record<string, string> = {};
        if (input.destination === "BANK" && !onFile.bank)
          missing.destination = "the user has no bank account on file for payouts; try WALLET";
        if (input.destination === "WALLET" && !onFile.wallet)
          missing.destination = "the user has no wallet on file for payouts; try BANK";
        if (!onFile.debit) missing.repaymentSchedule = "the user has no direct-debit authorisation on file";
        if (Object.keys(missing).length) throw validationFailed(missing);
      }
      // The per-user daily limit, counted in this transaction under a lock on (partner, environment, user), so
      // concurrent creates at the limit admit exactly the limit. A replay never reaches here: it is answered
      // from its idempotency record before the write runs.
      const dayEnds = nextLagosMidnight(now);
      const createdToday = await repo.lockAndCountForUser(
        tx,
        caller,
        input.userId,
        lagosDayStart(now),
        dayEnds,
      );
      if (createdToday >= perUserPerDay) {
        o.metrics?.expensiveLimitRejections.inc({ limit: "user_daily_disbursements" });
        throw new ApiError(
          "user_daily_disbursement_limit",
          `You have created ${createdToday} disbursements for this user today (Lagos time), the most allowed ` +
            `(${perUserPerDay}); retry after midnight in Lagos (${dayEnds.toISOString()}).`,
          {
            retryAfterSeconds: Math.max(1, Math.ceil((dayEnds.getTime() - now.getTime()) / 1000)),
            details: { limit: perUserPerDay, resetsAt: dayEnds.toISOString() },
          },
        );
      }
      const id = newId("dsb");
      const mandate = o.mandates.mint(id);
      const row: Disbursement = {
        id,
        partnerId: caller.partnerId,
        environment: caller.environment,
        userId: input.userId,
        status: "AWAITING_ACCEPTANCE",
        principalKobo: input.principalKobo,
        feeKobo: feeKobo(input.principalKobo, rate),
        feeRateBps: rate,
        destination: input.destination as "WALLET" | "BANK",
        reference: input.reference,
        scheduleAcceptedAt: null,
        failureReason: null,
        provider: provider.name,
        createdAt: now,
        processingAt: null,
        deliveredAt: null,
        failedAt: null,
        reversedAt: null,
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
      if (!(await repo.insert(tx, row))) {
        throw new ApiError(
          "conflict",
          `Reference ${input.reference} is already used by another disbursement.`,
        );
      }
      await repo.insertSchedule(tx, id, input.installments, DEBIT_HOUR_UTC);
      return { row, installments: input.installments, acceptanceUrl: o.mandates.acceptanceUrl(row) };
    },

    /** A disbursement of the caller's, as it is now, with its schedule. */
    async get(em: Em, id: string): Promise<DisbursementView> {
      const row = isId("dsb", id) ? await repo.find(em, id) : null;
      if (!row) throw new ApiError("not_found", `No disbursement ${id}.`);
      return {
        row: o.mandates.current(row),
        installments: await repo.schedule(em, id),
        acceptanceUrl: o.mandates.acceptanceUrl(row),
      };
    },

    /**
     * A page of the caller's disbursements, newest first, each as {@link get} shows it, after
     * `startingAfter` (one of the caller's own), filtered by status as shown and by user when asked.
     */
    async list(em: Em, filter: DisbursementFilter, page: { limit: number; startingAfter: string }) {
      if (page.startingAfter && !(await repo.find(em, page.startingAfter)))
        throw unknownCursor("disbursements");
      const limit = pageSize(page.limit);
      const now = o.clock.now();
      const rows = await listRepo.page(em, filter, now, page.startingAfter || undefined, limit + 1);
      const { items, hasMore } = pageOf(rows, limit);
      const schedules = await listRepo.schedules(
        em,
        items.map((r) => r.id),
      );
      const views: DisbursementView[] = items.map((row) => ({
        row: o.mandates.current(row),
        installments: schedules.get(row.id) ?? [],
        acceptanceUrl: o.mandates.acceptanceUrl(row),
      }));
      return { items: views, hasMore };
    },

    /**
     * The payout job. Claims PENDING → PROCESSING and asks the provider with our id as the idempotent
     * reference. A PROCESSING disbursement found here is a retry (a crash after the claim, a time-out, a
     * pending answer): the provider is asked about that reference first, so a retry never pays twice. The
     * outcome is then settled by {@link settlePayout}.
     */
    async payout(em: Em, id: string): Promise<Disbursement["status"]> {
      const now = clock.now();
      // One attempt at a time per disbursement, so the provider is never asked twice at once (the job and
      // the sweep): a PROCESSING payout is taken again only once its last attempt's lease has passed.
      const claimed = await repo.claimPayout(em, id, now, new Date(now.getTime() - o.leaseMs));
      if (!claimed) return "DELIVERED";
      const d = claimed.disbursement;
      failpoint("payout.before_provider");
      const provider = providerOf(d.environment);
      let outcome: TransferOutcome;
      try {
        outcome = await provider.transfer(
          em,
          {
            reference: d.id,
            partnerReference: d.reference,
            amountKobo: d.principalKobo,
            destination: d.destination,
            userId: d.userId,
          },
          { resumed: claimed.previousStatus === "PROCESSING" },
        );
      } catch (err) {
        // The provider could not say what happened: release the lease so the retry asks again at once.
        await repo.releasePayout(em, id);
        throw err;
      }
      failpoint("payout.after_provider");
      return this.settlePayout(em, id, outcome);
    },

    /**
     * Records what the provider says of a payout, whoever learnt it (the payout job, the provider's webhook,
     * a sandbox helper). Every change is guarded by the status it starts from, so hearing the same outcome
     * twice changes nothing. SUCCESS: DELIVERED, booked (principal out, fee) and `DISBURSEMENT_DELIVERED`.
     * FAILED (or reversed before we saw it delivered): FAILED with the reason, the schedule cancelled.
     * REVERSED after delivery: REVERSED with the reason, principal and fee booked back, the schedule
     * cancelled, and a refund owed (with its job) for every repayment already collected; no event
     * (CONTRACT.md §6).
     */
    async settlePayout(em: Em, id: string, outcome: TransferOutcome): Promise<Disbursement["status"]> {
      let changed: { environment: string; outcome: string } | undefined;
      const status = await em.transactional(async (tx) => {
        const now = clock.now();
        const current = await repo.lock(tx, id);
        if (!current) throw new Error(`no disbursement ${id}`);
        if (outcome.status === "PENDING") return current.status;
        if (current.status === "PROCESSING" && outcome.status !== "SUCCESS") {
          await repo.settle(tx, id, { status: "FAILED", failureReason: outcome.reason, failedAt: now });
          // Nothing was paid, so nothing is owed.
          await repo.cancelSchedule(tx, id);
          changed = { environment: current.environment, outcome: "failed" };
          return "FAILED";
        }
        if (current.status === "DELIVERED" && outcome.status === "REVERSED") {
          await repo.settle(tx, id, { status: "REVERSED", failureReason: outcome.reason, reversedAt: now });
          await book(tx, current, [
            ["PRINCIPAL_REVERSED", current.principalKobo],
            ["FEE_REVERSED", current.feeKobo],
          ]);
          await repo.cancelSchedule(tx, id);
          // What was collected is owed back (CONTRACT.md §6): each collected repayment's refund is marked owed
          // with the reversal; the refund worker sends it (RefundService).
          const owed = await refundRepository.owe(tx, id);
          for (const installmentId of owed) await o.jobs.send(tx, REFUND_QUEUE, { installmentId });
          await repo.refreshHistory(tx, current.userId, lenderScope(current));
          changed = { environment: current.environment, outcome: "reversed" };
          return "REVERSED";
        }
        if (current.status !== "PROCESSING" || outcome.status !== "SUCCESS") return current.status;
        failpoint("payout.before_record");
        await repo.settle(tx, id, { status: "DELIVERED", deliveredAt: now });
        await book(tx, current, [
          ["PRINCIPAL_OUT", -current.principalKobo],
          ["FEE", -current.feeKobo],
        ]);
        await outbox.raise(tx, {
          partnerId: current.partnerId,
          environment: current.environment,
          type: "DISBURSEMENT_DELIVERED",
          payload: {
            disbursementId: current.id,
            userId: current.userId,
            principalKobo: current.principalKobo.toString(),
            feeKobo: current.feeKobo.toString(),
            destination: current.destination,
            reference: current.reference,
            deliveredAt: now.toISOString(),
          },
        });
        await repo.refreshHistory(tx, current.userId, lenderScope(current));
        changed = { environment: current.environment, outcome: "delivered" };
        return "DELIVERED";
      });
      // Counted once the change is committed, by the process that made it.
      if (changed) o.metrics?.payouts.inc(changed);
      return status;
    },

    /** A disbursement of the environment, for the provider's webhook (which names it by our reference). */
    async byId(em: Em, environment: Environment, id: string): Promise<Disbursement | undefined> {
      if (!isId("dsb", id)) return undefined;
      return (await repo.findInEnvironment(em, environment, id)) ?? undefined;
    },

    providerFor: providerOf,

    /**
     * Resumes payouts left PENDING or PROCESSING longer than `olderThanMs` (their job was lost, or the
     * worker died mid-payout). Safe beside a live job: the provider is asked by our id and the outcome is
     * recorded once.
     */
    async resumeStuck(em: Em, olderThanMs: number): Promise<number> {
      const stuck = await repo.stuckPayouts(em, new Date(clock.now().getTime() - olderThanMs), 200);
      for (const id of stuck) {
        try {
          await this.payout(em, id);
        } catch (err) {
          // One payout the provider cannot answer for now does not hold up the others.
          o.logger.warn("payout not resumed", { disbursementId: id, err });
        }
      }
      return stuck.length;
    },

    /**
     * Deletes a partner's sandbox disbursements with their repayments, books entries and repayment history
     * (the sandbox reset), in the caller's transaction; false, deleting nothing, while a payout, debit or
     * refund of theirs is at the payment provider.
     */
    async deleteSandbox(tx: Em, partnerId: string): Promise<number | false> {
      if ((await repo.lockSandbox(tx, partnerId)).busy) return false;
      await o.books.deleteSandbox(tx, partnerId);
      return repo.deleteSandbox(tx, partnerId);
    },

    /** Recomputes a user's repayment history roll-ups in the lender scope of a loan of theirs. */
    refreshHistory(
      tx: Em,
      loan: { userId: string; environment: Environment; partnerId: string },
    ): Promise<void> {
      return repo.refreshHistory(tx, loan.userId, lenderScope(loan));
    },

    /**
     * Records a loan repaid (or defaulted) long ago, as it ended, with no event, no job and no booking: the
     * sandbox fixtures' repayment history. Nothing happens when it is there already.
     */
    async recordPastLoan(tx: Em, loan: PastLoan): Promise<void> {
      await repo.insertPastLoan(tx, loan);
      await repo.refreshHistory(
        tx,
        loan.userId,
        lenderScope({ environment: "sandbox", partnerId: loan.partnerId }),
      );
    },

    /**
     * The sandbox provider fails a payout still PENDING or PROCESSING (a sandbox helper): a PENDING payout is
     * taken now and asks the simulator, which answers FAILED; a PROCESSING one is settled with that answer,
     * as a provider webhook would settle it.
     */
    async failInSandbox(em: Em, id: string): Promise<void> {
      // The row stays locked from the check to the settlement: of concurrent calls, one fails it, the others
      // then find it FAILED.
      await em.transactional(async (tx) => {
        const row = await lockedInSandbox(tx, id);
        if (row.status !== "PENDING" && row.status !== "PROCESSING")
          throw new ApiError(
            "conflict",
            `Only a PENDING or PROCESSING disbursement can be failed; this one is ${row.status}.`,
          );
        const failed = { status: "FAILED" as const, reason: "destination_unavailable" };
        await repo.setSimulatedTransfer(tx, row.id, row.principalKobo, { ...failed, onlyFrom: "PENDING" });
        if (row.status === "PENDING") await this.payout(tx, row.id);
        else await this.settlePayout(tx, row.id, failed);
      });
    },

    /** The sandbox provider reverses a DELIVERED payout (a sandbox helper), settled as its webhook would be. */
    async reverseInSandbox(em: Em, id: string): Promise<void> {
      await em.transactional(async (tx) => {
        const row = await lockedInSandbox(tx, id);
        if (row.status !== "DELIVERED")
          throw new ApiError(
            "conflict",
            `Only a DELIVERED disbursement can be reversed; this one is ${row.status}.`,
          );
        const reversed = { status: "REVERSED" as const, reason: "transfer_reversed" };
        await repo.setSimulatedTransfer(tx, row.id, row.principalKobo, reversed);
        await this.settlePayout(tx, row.id, reversed);
      });
    },
  };
}
