import type { ConsentService } from "../consent/consent.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { failpoint } from "../platform/failpoints.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { PaymentInstrumentStore } from "../users/payment-instruments.ts";
import type { Outbox } from "../webhooks/outbox.ts";
import { feeKobo } from "./fee.ts";
import type { PaymentProvider, TransferOutcome } from "./provider.ts";

/** The queue of payout jobs; one job per disbursement (its id is the singleton key). */
export const PAYOUT_QUEUE = "disbursements.payout";
/** The queue of debit jobs, one per installment, due on its date. */
export const COLLECT_QUEUE = "repayments.collect";
/** Debits run at 08:00 in Lagos (07:00 UTC) on the due date. */
export const DEBIT_HOUR_UTC = 7;

/** A disbursement as stored. */
export interface DisbursementRow {
  id: string;
  partner_id: string;
  environment: Environment;
  user_id: string;
  status: "PENDING" | "PROCESSING" | "DELIVERED" | "FAILED" | "REVERSED";
  principal_kobo: string;
  fee_kobo: string;
  fee_rate_bps: number;
  destination: "WALLET" | "BANK";
  reference: string;
  schedule_accepted_at: Date;
  failure_reason: string | null;
  created_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  reversed_at: Date | null;
}

/** What CreateDisbursement takes. */
export interface DisbursementInput {
  userId: string;
  principalKobo: bigint;
  destination: "WALLET" | "BANK" | undefined;
  reference: string;
  installments: { dueDate: string; amountKobo: bigint }[];
  scheduleAcceptedAt: string;
}

const MAX_PRINCIPAL = 1_000_000_000_000n;
const REFERENCE = /^[\x21-\x7e]{1,64}$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const COLUMNS = `id, partner_id, environment, user_id, status, principal_kobo::text, fee_kobo::text, fee_rate_bps, destination,
  reference, schedule_accepted_at, failure_reason, created_at, delivered_at, failed_at, reversed_at`;

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
  jobs: Jobs;
  outbox: Outbox;
  /** The provider per environment; production has none until the HTTP adapter is configured. */
  providers: Partial<Record<Environment, PaymentProvider>>;
  instruments: PaymentInstrumentStore;
  logger: Logger;
  metrics?: Metrics;
  /** How long an attempt holds a PROCESSING payout (PAYOUT_RESUME_AFTER_MS; longer than a provider call). */
  leaseMs: number;
}) {
  const { clock, jobs, outbox } = o;

  const validate = (input: DisbursementInput, now: Date) => {
    const problems: Record<string, string> = {};
    if (input.principalKobo <= 0n || input.principalKobo > MAX_PRINCIPAL)
      problems.principalKobo = "must be 1 to 1000000000000 kobo";
    if (!input.destination) problems.destination = "must be WALLET or BANK";
    if (!REFERENCE.test(input.reference)) problems.reference = "must be 1 to 64 visible ASCII characters";
    const accepted = Date.parse(input.scheduleAcceptedAt);
    if (Number.isNaN(accepted) || accepted > now.getTime() + 5 * ms.minute)
      problems.scheduleAcceptedAt = "must be an RFC 3339 time, not in the future";
    const today = now.toISOString().slice(0, 10);
    if (input.installments.length < 1 || input.installments.length > 60)
      problems.repaymentSchedule = "must have 1 to 60 installments";
    let previous = today;
    input.installments.forEach((inst, i) => {
      if (!DATE.test(inst.dueDate) || Number.isNaN(Date.parse(`${inst.dueDate}T00:00:00Z`)))
        problems[`repaymentSchedule.installments[${i}].dueDate`] = "must be a date YYYY-MM-DD";
      else if (inst.dueDate <= previous)
        problems[`repaymentSchedule.installments[${i}].dueDate`] =
          "must be after the previous installment (the first after today)";
      else previous = inst.dueDate;
      if (inst.amountKobo <= 0n)
        problems[`repaymentSchedule.installments[${i}].amountKobo`] = "must be positive";
    });
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

  const cancelSchedule = (tx: Em, id: string) =>
    // Nothing was paid (or it came back), so nothing is owed. A debit already at the provider is left to settle.
    sql(
      tx,
      `update installments set status = 'CANCELLED', next_attempt_at = null
        where disbursement_id = $1 and status = 'SCHEDULED' and pending_reference is null`,
      [id],
    );

  const book = (tx: Em, d: DisbursementRow, entries: [string, bigint][]) =>
    sql(
      tx,
      `insert into book_entries (partner_id, environment, disbursement_id, kind, amount_kobo, booked_at)
       select $1, $2, $3, k, a, $6 from unnest($4::text[], $5::bigint[]) as t (k, a)`,
      [
        d.partner_id,
        d.environment,
        d.id,
        entries.map(([k]) => k),
        entries.map(([, a]) => a.toString()),
        clock.now(),
      ],
    );

  return {
    /**
     * Creates a disbursement, inside the transaction that stores the request's idempotency record: the edge
     * opens one only for a request with an `Idempotency-Key` (CONTRACT.md §6: a payout is never started
     * without a key to retry it safely with).
     */
    async create(tx: Em, caller: Caller, input: DisbursementInput): Promise<DisbursementRow> {
      if (!tx.isInTransaction()) throw new ApiError("idempotency_key_required");
      const now = clock.now();
      validate(input, now);
      const provider = o.providers[caller.environment];
      if (provider?.environment !== caller.environment) {
        throw new ApiError("unavailable", `No payment provider is configured for ${caller.environment}.`);
      }
      await o.consents.assertActive(tx, caller, input.userId);
      const [partner] = await sql<{ fee_rate_bps: number }>(
        tx,
        "select fee_rate_bps from partners where id = $1",
        [caller.partnerId],
      );
      const rate = partner?.fee_rate_bps ?? 0;
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
      const id = newId("dsb");
      let row: DisbursementRow | undefined;
      try {
        [row] = await sql<DisbursementRow>(
          tx,
          `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                      destination, reference, schedule_accepted_at, provider, created_at)
           values ($1, $2, $3, $4, 'PENDING', $5, $6, $7, $8, $9, $10, $11, $12) returning ${COLUMNS}`,
          [
            id,
            caller.partnerId,
            caller.environment,
            input.userId,
            input.principalKobo.toString(),
            feeKobo(input.principalKobo, rate).toString(),
            rate,
            input.destination,
            input.reference,
            new Date(input.scheduleAcceptedAt),
            provider.name,
            now,
          ],
        );
      } catch (err) {
        if ((err as { code?: string }).code === "23505") {
          throw new ApiError(
            "conflict",
            `Reference ${input.reference} is already used by another disbursement.`,
          );
        }
        throw err;
      }
      const installments = await sql<{ id: string; next_attempt_at: Date }>(
        tx,
        `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, next_attempt_at)
         select 'rpy_' || substr($1, 5) || '_' || s, $1, s, d::date, a, 'SCHEDULED',
                (d::date + make_interval(hours => $4)) at time zone 'UTC'
           from unnest($2::text[], $3::bigint[]) with ordinality as t (d, a, s)
         returning id, next_attempt_at`,
        [
          id,
          input.installments.map((i) => i.dueDate),
          input.installments.map((i) => i.amountKobo.toString()),
          DEBIT_HOUR_UTC,
        ],
      );
      await jobs.send(tx, PAYOUT_QUEUE, { disbursementId: id });
      // A debit job per installment on its date; the minute sweep catches any that is lost.
      await jobs.insert(
        tx,
        COLLECT_QUEUE,
        installments.map((i) => ({ data: { installmentId: i.id }, startAfter: i.next_attempt_at })),
      );
      return row as DisbursementRow;
    },

    async get(
      em: Em,
      caller: Caller,
      id: string,
    ): Promise<{ row: DisbursementRow; installments: { due_date: string; amount_kobo: string }[] }> {
      const [row] = isId("dsb", id)
        ? await sql<DisbursementRow>(
            em,
            `select ${COLUMNS} from disbursements where id = $1 and partner_id = $2 and environment = $3`,
            [id, caller.partnerId, caller.environment],
          )
        : [];
      if (!row) throw new ApiError("not_found", `No disbursement ${id}.`);
      const installments = await sql<{ due_date: string; amount_kobo: string }>(
        em,
        "select to_char(due_date, 'YYYY-MM-DD') as due_date, amount_kobo::text from installments where disbursement_id = $1 order by seq",
        [id],
      );
      return { row, installments };
    },

    /**
     * The payout job. Claims PENDING → PROCESSING and asks the provider with our id as the idempotent
     * reference. A PROCESSING disbursement found here is a retry (a crash after the claim, a time-out, a
     * pending answer): the provider is asked about that reference first, so a retry never pays twice. The
     * outcome is then settled by {@link settlePayout}.
     */
    async payout(em: Em, id: string): Promise<DisbursementRow["status"]> {
      const [claimed] = await sql<DisbursementRow & { previous_status: string }>(
        em,
        // A PROCESSING payout is taken again only once its last attempt's lease has passed: one attempt at
        // a time per disbursement, so the provider is never asked twice at once (the job and the sweep).
        `update disbursements set status = 'PROCESSING', processing_at = $2
           from (select id as old_id, status as previous_status from disbursements
                  where id = $1 and (status = 'PENDING' or (status = 'PROCESSING' and processing_at <= $3))
                  for update) old
          where id = old.old_id
         returning ${COLUMNS}, previous_status`,
        [id, clock.now(), new Date(clock.now().getTime() - o.leaseMs)],
      );
      if (!claimed) return "DELIVERED";
      failpoint("payout.before_provider");
      const provider = providerOf(claimed.environment);
      let outcome: TransferOutcome;
      try {
        outcome = await provider.transfer(
          em,
          {
            reference: claimed.id,
            partnerReference: claimed.reference,
            amountKobo: BigInt(claimed.principal_kobo),
            destination: claimed.destination,
            userId: claimed.user_id,
          },
          { resumed: claimed.previous_status === "PROCESSING" },
        );
      } catch (err) {
        // The provider could not say what happened: release the lease so the retry asks again at once.
        await sql(em, "update disbursements set processing_at = $2 where id = $1 and status = 'PROCESSING'", [
          id,
          new Date(0),
        ]);
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
     * cancelled; no event (CONTRACT.md §6).
     */
    async settlePayout(em: Em, id: string, outcome: TransferOutcome): Promise<DisbursementRow["status"]> {
      let changed: { environment: string; outcome: string } | undefined;
      const status = await em.transactional(async (tx) => {
        const now = clock.now();
        const [current] = await sql<DisbursementRow>(
          tx,
          `select ${COLUMNS} from disbursements where id = $1 for update`,
          [id],
        );
        if (!current) throw new Error(`no disbursement ${id}`);
        if (outcome.status === "PENDING") return current.status;
        if (current.status === "PROCESSING" && outcome.status !== "SUCCESS") {
          await sql(
            tx,
            "update disbursements set status = 'FAILED', failure_reason = $2, failed_at = $3 where id = $1",
            [id, outcome.reason, now],
          );
          await cancelSchedule(tx, id);
          changed = { environment: current.environment, outcome: "failed" };
          return "FAILED";
        }
        if (current.status === "DELIVERED" && outcome.status === "REVERSED") {
          await sql(
            tx,
            "update disbursements set status = 'REVERSED', failure_reason = $2, reversed_at = $3 where id = $1",
            [id, outcome.reason, now],
          );
          await book(tx, current, [
            ["PRINCIPAL_REVERSED", BigInt(current.principal_kobo)],
            ["FEE_REVERSED", BigInt(current.fee_kobo)],
          ]);
          await cancelSchedule(tx, id);
          changed = { environment: current.environment, outcome: "reversed" };
          return "REVERSED";
        }
        if (current.status !== "PROCESSING" || outcome.status !== "SUCCESS") return current.status;
        failpoint("payout.before_record");
        await sql(tx, "update disbursements set status = 'DELIVERED', delivered_at = $2 where id = $1", [
          id,
          now,
        ]);
        await book(tx, current, [
          ["PRINCIPAL_OUT", -BigInt(current.principal_kobo)],
          ["FEE", -BigInt(current.fee_kobo)],
        ]);
        await outbox.raise(tx, {
          partnerId: current.partner_id,
          environment: current.environment,
          type: "DISBURSEMENT_DELIVERED",
          payload: {
            disbursementId: current.id,
            userId: current.user_id,
            principalKobo: current.principal_kobo,
            feeKobo: current.fee_kobo,
            destination: current.destination,
            reference: current.reference,
            deliveredAt: now.toISOString(),
          },
        });
        changed = { environment: current.environment, outcome: "delivered" };
        return "DELIVERED";
      });
      // Counted once the change is committed, by the process that made it.
      if (changed) o.metrics?.payouts.inc(changed);
      return status;
    },

    /** A disbursement of the environment, for the provider's webhook (which names it by our reference). */
    async byId(em: Em, environment: Environment, id: string): Promise<DisbursementRow | undefined> {
      if (!isId("dsb", id)) return undefined;
      const [row] = await sql<DisbursementRow>(
        em,
        `select ${COLUMNS} from disbursements where id = $1 and environment = $2`,
        [id, environment],
      );
      return row;
    },

    providerFor: providerOf,

    /**
     * Resumes payouts left PENDING or PROCESSING longer than `olderThanMs` (their job was lost, or the
     * worker died mid-payout). Safe beside a live job: the provider is asked by our id and the outcome is
     * recorded once.
     */
    async resumeStuck(em: Em, olderThanMs: number): Promise<number> {
      const stuck = await sql<{ id: string }>(
        em,
        `select id from disbursements where status in ('PENDING', 'PROCESSING')
            and coalesce(processing_at, created_at) <= $1 order by created_at limit 200`,
        [new Date(clock.now().getTime() - olderThanMs)],
      );
      for (const { id } of stuck) {
        try {
          await this.payout(em, id);
        } catch (err) {
          // One payout the provider cannot answer for now does not hold up the others.
          o.logger.warn("payout not resumed", { disbursementId: id, err });
        }
      }
      return stuck.length;
    },
  };
}
