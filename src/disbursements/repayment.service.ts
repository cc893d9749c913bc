import type { LedgerService } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { validationFailed } from "../platform/errors.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Caller } from "../platform/tenancy.ts";
import type { Outbox } from "../webhooks/outbox.ts";
import type { DisbursementService } from "./disbursement.service.ts";
import type { DebitOutcome } from "./provider.ts";

/** Repayment rules (CONTRACT.md §6), as data. */
export const repaymentSchedule = {
  /** A failed debit is retried daily... */
  retryEveryMs: ms.day,
  /** ...three times. */
  retries: 3,
  /** A claimed debit is held this long; past it (a crashed worker) the provider is asked again, same reference. */
  leaseMs: 2 * ms.minute,
  /** A debit the provider has not settled yet is asked about again this often (its webhook usually comes first). */
  pendingRecheckMs: 10 * ms.minute,
} as const;

/** A repayment (an installment and its collection) as partners see it. */
export interface RepaymentRow {
  id: string;
  disbursement_id: string;
  seq: number;
  due_date: string;
  amount_kobo: string;
  status: "SCHEDULED" | "COLLECTED" | "FAILED" | "CANCELLED";
  attempts: number;
  next_attempt_at: Date | null;
  last_failure: string | null;
  collected_at: Date | null;
  failed_at: Date | null;
}

const COLUMNS = `id, disbursement_id, seq, to_char(due_date, 'YYYY-MM-DD') as due_date, amount_kobo::text, status, attempts,
  next_attempt_at, last_failure, collected_at, failed_at`;

/** What {@link createRepaymentService} returns. */
export type RepaymentService = ReturnType<typeof createRepaymentService>;

/**
 * Direct-debit collection of accepted schedules. A data consent revoked later does not stop a schedule the
 * user accepted (CONTRACT.md §6). Each success is written to the user's ledger (so snapshots show it) and to
 * the partner's books, with `REPAYMENT_COLLECTED`; each failure emits `REPAYMENT_FAILED` and is retried daily,
 * three times.
 */
export function createRepaymentService(o: {
  clock: Clock;
  outbox: Outbox;
  ledger: LedgerService;
  disbursements: DisbursementService;
  metrics?: Metrics;
}) {
  const { clock, outbox } = o;
  return {
    /**
     * Makes one debit attempt if the installment is due; safe to call any number of times. A new attempt
     * gets a new provider reference (`rpy_…:<attempt>`), kept as the pending reference until its outcome is
     * recorded; while it is pending, a call asks the provider about it instead of charging again.
     */
    async collect(em: Em, installmentId: string): Promise<RepaymentRow["status"] | "NOT_DUE"> {
      const [claimed] = await sql<{
        id: string;
        amount_kobo: string;
        user_id: string;
        reference: string;
        environment: "sandbox" | "production";
        pending_reference: string;
        was_pending: boolean;
      }>(
        em,
        `update installments i
            set attempts = i.attempts + case when old.previous_reference is null then 1 else 0 end,
                pending_reference = coalesce(old.previous_reference, i.id || ':' || (i.attempts + 1)),
                next_attempt_at = $2::timestamptz + make_interval(secs => $3::double precision / 1000)
           from disbursements d,
                (select id as old_id, pending_reference as previous_reference from installments
                  where id = $1 and status = 'SCHEDULED' and next_attempt_at <= $2 for update) old
          where i.id = old.old_id and d.id = i.disbursement_id
            and (d.status = 'DELIVERED' or old.previous_reference is not null)
          returning i.id, i.amount_kobo::text, d.user_id, d.reference, d.environment, i.pending_reference,
                    old.previous_reference is not null as was_pending`,
        [installmentId, clock.now(), repaymentSchedule.leaseMs],
      );
      if (!claimed) return "NOT_DUE";
      const provider = o.disbursements.providerFor(claimed.environment);
      const outcome = await provider.debit(
        em,
        {
          reference: claimed.pending_reference,
          partnerReference: claimed.reference,
          amountKobo: BigInt(claimed.amount_kobo),
          userId: claimed.user_id,
        },
        { resumed: claimed.was_pending },
      );
      return this.settleDebit(em, claimed.pending_reference, outcome);
    },

    /**
     * Records what the provider says of a debit, whoever learnt it (the debit job or the provider's webhook).
     * Only the pending reference is settled, once: SUCCESS writes the user's ledger, the partner's books and
     * `REPAYMENT_COLLECTED`; FAILED emits `REPAYMENT_FAILED` and schedules the next daily retry, or gives up
     * after the third. PENDING leaves it to be asked again (or settled by the webhook).
     */
    async settleDebit(
      em: Em,
      reference: string,
      outcome: DebitOutcome,
    ): Promise<RepaymentRow["status"] | "NOT_DUE"> {
      let changed: { environment: string; outcome: string } | undefined;
      const status = await em.transactional(async (tx): Promise<RepaymentRow["status"] | "NOT_DUE"> => {
        const at = clock.now();
        const [claimed] = await sql<
          RepaymentRow & { partner_id: string; environment: "sandbox" | "production"; user_id: string }
        >(
          tx,
          `select i.id, i.disbursement_id, to_char(i.due_date, 'YYYY-MM-DD') as due_date, i.amount_kobo::text, i.status,
                  i.attempts, d.partner_id, d.environment, d.user_id
             from installments i join disbursements d on d.id = i.disbursement_id
            where i.pending_reference = $1 for update of i`,
          [reference],
        );
        if (!claimed) return "NOT_DUE";
        if (outcome.status === "PENDING") {
          await sql(tx, "update installments set next_attempt_at = $2 where id = $1", [
            claimed.id,
            new Date(at.getTime() + repaymentSchedule.pendingRecheckMs),
          ]);
          return "SCHEDULED";
        }
        const payload = {
          repaymentId: claimed.id,
          disbursementId: claimed.disbursement_id,
          userId: claimed.user_id,
          amountKobo: claimed.amount_kobo,
          dueDate: claimed.due_date,
          attempt: claimed.attempts,
        };
        if (outcome.status === "SUCCESS") {
          await sql(
            tx,
            `update installments set status = 'COLLECTED', collected_at = $2, next_attempt_at = null, pending_reference = null
              where id = $1`,
            [claimed.id, at],
          );
          await o.ledger.ingest(tx, [
            {
              id: `repayment:${claimed.id}`,
              userId: claimed.user_id,
              amountKobo: BigInt(claimed.amount_kobo),
              direction: "OUT",
              counterpartyId: `lender:${claimed.partner_id}`,
              channel: "other",
              occurredAt: at,
            },
          ]);
          await sql(
            tx,
            `insert into book_entries (partner_id, environment, disbursement_id, installment_id, kind, amount_kobo, booked_at)
             values ($1, $2, $3, $4, 'REPAYMENT_IN', $5, $6)`,
            [
              claimed.partner_id,
              claimed.environment,
              claimed.disbursement_id,
              claimed.id,
              claimed.amount_kobo,
              at,
            ],
          );
          await outbox.raise(tx, {
            partnerId: claimed.partner_id,
            environment: claimed.environment,
            type: "REPAYMENT_COLLECTED",
            payload: { ...payload, collectedAt: at.toISOString() },
          });
          changed = { environment: claimed.environment, outcome: "collected" };
          return "COLLECTED";
        }
        const willRetry = claimed.attempts <= repaymentSchedule.retries;
        await sql(
          tx,
          `update installments set last_failure = $2, pending_reference = null,
                  status = case when $3 then 'SCHEDULED' else 'FAILED' end,
                  next_attempt_at = case when $3 then $4::timestamptz else null end,
                  failed_at = case when $3 then null else $5::timestamptz end
            where id = $1`,
          [
            claimed.id,
            outcome.reason,
            willRetry,
            new Date(at.getTime() + repaymentSchedule.retryEveryMs),
            at,
          ],
        );
        await outbox.raise(tx, {
          partnerId: claimed.partner_id,
          environment: claimed.environment,
          type: "REPAYMENT_FAILED",
          payload: { ...payload, failureCode: outcome.reason, willRetry, failedAt: at.toISOString() },
        });
        changed = { environment: claimed.environment, outcome: willRetry ? "retrying" : "failed" };
        return willRetry ? "SCHEDULED" : "FAILED";
      });
      if (changed) o.metrics?.debits.inc(changed);
      return status;
    },

    /** The debit in flight under a provider reference, in an environment (for the provider's webhook). */
    async pendingDebit(
      em: Em,
      environment: "sandbox" | "production",
      reference: string,
    ): Promise<{ installmentId: string; amountKobo: bigint } | undefined> {
      const [row] = await sql<{ id: string; amount_kobo: string }>(
        em,
        `select i.id, i.amount_kobo::text from installments i join disbursements d on d.id = i.disbursement_id
          where i.pending_reference = $1 and d.environment = $2`,
        [reference, environment],
      );
      return row ? { installmentId: row.id, amountKobo: BigInt(row.amount_kobo) } : undefined;
    },

    /** Collects every installment due now (the minute sweep; also what a test's clock drives). */
    async collectDue(em: Em, limit = 500): Promise<number> {
      const due = await sql<{ id: string }>(
        em,
        `select i.id from installments i join disbursements d on d.id = i.disbursement_id
          where i.status = 'SCHEDULED' and i.next_attempt_at <= $1
            and (d.status = 'DELIVERED' or i.pending_reference is not null)
          order by i.next_attempt_at limit $2`,
        [clock.now(), limit],
      );
      for (const { id } of due) await this.collect(em, id);
      return due.length;
    },

    async list(em: Em, caller: Caller, disbursementId: string): Promise<RepaymentRow[]> {
      await o.disbursements.get(em, caller, disbursementId);
      return sql<RepaymentRow>(
        em,
        `select ${COLUMNS} from installments where disbursement_id = $1 order by seq`,
        [disbursementId],
      );
    },

    /** The partner's book entries between two dates (inclusive), with totals. */
    async books(em: Em, caller: Caller, from: string, to: string) {
      const day = /^\d{4}-\d{2}-\d{2}$/;
      if ((from && !day.test(from)) || (to && !day.test(to)))
        throw validationFailed({ from: "from and to are dates YYYY-MM-DD" });
      const rows = await sql<{
        disbursement_id: string;
        installment_id: string | null;
        kind: string;
        amount_kobo: string;
        booked_at: Date;
      }>(
        em,
        `select disbursement_id, installment_id, kind, amount_kobo::text, booked_at from book_entries
          where partner_id = $1 and environment = $2
            and ($3 = '' or booked_at >= $3::date) and ($4 = '' or booked_at < $4::date + 1)
          order by booked_at, id`,
        [caller.partnerId, caller.environment, from, to],
      );
      const sum = (...kinds: string[]) =>
        rows.filter((r) => kinds.includes(r.kind)).reduce((s, r) => s + BigInt(r.amount_kobo), 0n);
      return {
        entries: rows,
        // Net of reversals: a reversed payout's principal and fee come back.
        principalOutKobo: sum("PRINCIPAL_OUT", "PRINCIPAL_REVERSED"),
        feesKobo: sum("FEE", "FEE_REVERSED"),
        repaymentsInKobo: sum("REPAYMENT_IN"),
        netKobo: rows.reduce((s, r) => s + BigInt(r.amount_kobo), 0n),
      };
    },
  };
}
