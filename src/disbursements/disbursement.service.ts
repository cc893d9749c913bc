import type { PgBoss } from "pg-boss";
import { fromKysely } from "pg-boss";
import type { Environment } from "../apikeys/api-key.entity.ts";
import type { Caller } from "../apikeys/api-key.service.ts";
import { consentRefusal } from "../consent/consent.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em, Orm } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { failpoint } from "../platform/failpoints.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Outbox } from "../webhooks/outbox.ts";
import { feeKobo } from "./fee.ts";
import { type PaymentProvider, sandboxProvider } from "./provider.ts";

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
  reference, schedule_accepted_at, failure_reason, created_at, delivered_at`;

/** What {@link createDisbursementService} returns. */
export type DisbursementService = ReturnType<typeof createDisbursementService>;

/**
 * Disbursements (CONTRACT.md §6). A create is written, fee fixed, with its payout job in the transaction
 * that also stores the idempotency record; the payout job moves it PENDING → PROCESSING → DELIVERED (or
 * FAILED), asking the provider by our id, so a retried or crashed job never pays twice.
 */
export function createDisbursementService(o: {
  orm: Orm;
  clock: Clock;
  boss: PgBoss;
  outbox: Outbox;
  /** The provider per environment; production has none until the HTTP adapter is configured. */
  providers: Partial<Record<Environment, PaymentProvider>>;
}) {
  const { orm, clock, boss, outbox } = o;

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

  return {
    async create(caller: Caller, input: DisbursementInput, tx: Em | undefined): Promise<DisbursementRow> {
      // CONTRACT.md §6: a payout is never started without an idempotency key to retry it safely with.
      if (!tx) throw new ApiError("idempotency_key_required");
      const now = clock.now();
      validate(input, now);
      if (!o.providers[caller.environment]) {
        throw new ApiError("unavailable", `No payment provider is configured for ${caller.environment}.`);
      }
      const [consent] = await sql<{ status: string; expires_at: Date }>(
        tx,
        `select status, expires_at from consents where partner_id = $1 and environment = $2 and user_id = $3
          order by granted_at desc, id desc limit 1`,
        [caller.partnerId, caller.environment, input.userId],
      );
      const refusal = consentRefusal(consent, now);
      if (refusal) throw new ApiError(refusal);
      const [partner] = await sql<{ fee_rate_bps: number }>(
        tx,
        "select fee_rate_bps from partners where id = $1",
        [caller.partnerId],
      );
      const rate = partner?.fee_rate_bps ?? 0;
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
            o.providers[caller.environment]?.name,
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
      const db = fromKysely(tx.getTransactionContext() as never);
      await boss.send(PAYOUT_QUEUE, { disbursementId: id }, { singletonKey: id, db });
      // A debit job per installment on its date; the minute sweep catches any that is lost.
      await boss.insert(
        COLLECT_QUEUE,
        installments.map((i) => ({
          data: { installmentId: i.id },
          startAfter: i.next_attempt_at,
          singletonKey: i.id,
        })),
        { db },
      );
      return row as DisbursementRow;
    },

    async get(
      caller: Caller,
      id: string,
    ): Promise<{ row: DisbursementRow; installments: { due_date: string; amount_kobo: string }[] }> {
      const em = orm.em.fork();
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
     * The payout job. Claims PENDING → PROCESSING, asks the provider with our id as the idempotent
     * reference (a PROCESSING disbursement found here is a crash after the claim: asking again returns the
     * first outcome, it never pays twice), then records the outcome, the books and the event in one transaction.
     */
    async payout(id: string): Promise<DisbursementRow["status"]> {
      const [claimed] = await sql<DisbursementRow>(
        orm.em.fork(),
        `update disbursements set status = 'PROCESSING', processing_at = $2 where id = $1 and status in ('PENDING', 'PROCESSING')
         returning ${COLUMNS}`,
        [id, clock.now()],
      );
      if (!claimed) return "DELIVERED";
      failpoint("payout.before_provider");
      const provider = o.providers[claimed.environment];
      if (!provider) throw new Error(`no payment provider for ${claimed.environment}`);
      const outcome = await provider.transfer(orm.em.fork(), {
        reference: claimed.id,
        partnerReference: claimed.reference,
        amountKobo: BigInt(claimed.principal_kobo),
        destination: claimed.destination,
        userId: claimed.user_id,
      });
      failpoint("payout.after_provider");
      return orm.em.fork().transactional(async (tx) => {
        const now = clock.now();
        if (outcome.status === "FAILED") {
          await sql(
            tx,
            "update disbursements set status = 'FAILED', failure_reason = $2, failed_at = $3 where id = $1 and status = 'PROCESSING'",
            [id, outcome.reason, now],
          );
          // Nothing was paid, so nothing is owed.
          await sql(
            tx,
            "update installments set status = 'CANCELLED', next_attempt_at = null where disbursement_id = $1 and status = 'SCHEDULED'",
            [id],
          );
          return "FAILED";
        }
        failpoint("payout.before_record");
        const [done] = await sql<DisbursementRow>(
          tx,
          `update disbursements set status = 'DELIVERED', delivered_at = $2 where id = $1 and status = 'PROCESSING' returning ${COLUMNS}`,
          [id, now],
        );
        if (!done) return "DELIVERED";
        await sql(
          tx,
          `insert into book_entries (partner_id, environment, disbursement_id, kind, amount_kobo, booked_at)
           values ($1, $2, $3, 'PRINCIPAL_OUT', $4, $6), ($1, $2, $3, 'FEE', $5, $6)`,
          [
            done.partner_id,
            done.environment,
            done.id,
            (-BigInt(done.principal_kobo)).toString(),
            (-BigInt(done.fee_kobo)).toString(),
            now,
          ],
        );
        await outbox.raise(tx, {
          partnerId: done.partner_id,
          environment: done.environment,
          type: "DISBURSEMENT_DELIVERED",
          payload: {
            disbursementId: done.id,
            userId: done.user_id,
            principalKobo: done.principal_kobo,
            feeKobo: done.fee_kobo,
            destination: done.destination,
            reference: done.reference,
            deliveredAt: now.toISOString(),
          },
        });
        return "DELIVERED";
      });
    },

    providerFor: (environment: Environment) => o.providers[environment],

    /**
     * Resumes payouts left PENDING or PROCESSING longer than `olderThanMs` (their job was lost, or the
     * worker died mid-payout). Safe beside a live job: the provider is asked by our id and the outcome is
     * recorded once.
     */
    async resumeStuck(olderThanMs: number): Promise<number> {
      const stuck = await sql<{ id: string }>(
        orm.em.fork(),
        `select id from disbursements where status in ('PENDING', 'PROCESSING')
            and coalesce(processing_at, created_at) <= $1 order by created_at limit 200`,
        [new Date(clock.now().getTime() - olderThanMs)],
      );
      for (const { id } of stuck) await this.payout(id);
      return stuck.length;
    },
  };
}

/** The providers of this deployment: the simulator for sandbox; production's HTTP adapter is not built yet. */
export const defaultProviders: Partial<Record<Environment, PaymentProvider>> = { sandbox: sandboxProvider };
