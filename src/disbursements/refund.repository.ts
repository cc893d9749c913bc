import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Environment } from "../platform/tenancy.ts";

/** A refund claimed for one attempt, with what the provider needs to be asked. */
export interface ClaimedRefund {
  installmentId: string;
  /** Our refund reference (`rfd_…`). */
  reference: string;
  /** The provider reference of the charge that collected the installment. */
  chargeReference: string;
  amountKobo: bigint;
  userId: string;
  environment: Environment;
  /** An attempt was made before (a crash, a lost answer, a refund not yet settled): ask before refunding. */
  resumed: boolean;
}

/** A refund owed, locked, with what settling it books and writes. */
export interface LockedRefund {
  installmentId: string;
  status: "PENDING" | "REFUNDED" | "FAILED";
  amountKobo: bigint;
  disbursementId: string;
  partnerId: string;
  environment: Environment;
  userId: string;
}

/**
 * The refund columns of `installments` and the sandbox simulator's `sandbox_refunds`: the refunds owed when a
 * payout is reversed after collections (CONTRACT.md §6). Part of the disbursements feature's tables, like
 * {@link disbursementRepository}; the refund worker serves every tenant, so these statements are raw and
 * filter by the row's own ids.
 */
export const refundRepository = {
  /**
   * Marks a refund owed on every COLLECTED installment of a REVERSED disbursement that has none yet, with its
   * reference; answers the installments newly marked. Changes nothing for any other disbursement, nor twice.
   * The disbursement is share-locked whatever its status, so a debit settled while the payout is being
   * reversed is never missed: the reversal (which locks it for update) either waits for this transaction and
   * then sees the collection, or this waits for the reversal and then sees REVERSED.
   */
  async owe(tx: Em, disbursementId: string): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      tx,
      `with d as (select id, status from disbursements where id = $1 for share)
       update installments i set refund_status = 'PENDING', refund_reference = 'rfd_' || substr(i.id, 5)
         from d
        where i.disbursement_id = d.id and d.status = 'REVERSED'
          and i.status = 'COLLECTED' and i.refund_status is null
       returning i.id`,
      [disbursementId],
    );
    return rows.map((r) => r.id);
  },

  /**
   * Claims a PENDING refund for one attempt with a lease, so one attempt at a time asks the provider: one
   * never attempted, or one whose last attempt's lease (or pending recheck) has passed.
   */
  async claim(em: Em, installmentId: string, now: Date, leaseMs: number): Promise<ClaimedRefund | undefined> {
    const [row] = await sql<{
      id: string;
      refund_reference: string;
      charge_reference: string;
      amount_kobo: string;
      user_id: string;
      environment: Environment;
      resumed: boolean;
    }>(
      em,
      `update installments i
          set refund_next_attempt_at = $2::timestamptz + make_interval(secs => $3::double precision / 1000)
         from disbursements d,
              (select id as old_id, refund_next_attempt_at as previous_at from installments
                where id = $1 and refund_status = 'PENDING'
                  and (refund_next_attempt_at is null or refund_next_attempt_at <= $2)
                for update) old
        where i.id = old.old_id and d.id = i.disbursement_id
       returning i.id, i.refund_reference, i.amount_kobo::text, d.user_id, d.environment,
                 coalesce(i.collected_reference, i.id || ':' || i.attempts) as charge_reference,
                 old.previous_at is not null as resumed`,
      [installmentId, now, leaseMs],
    );
    if (!row) return undefined;
    return {
      installmentId: row.id,
      reference: row.refund_reference,
      chargeReference: row.charge_reference,
      amountKobo: BigInt(row.amount_kobo),
      userId: row.user_id,
      environment: row.environment,
      resumed: row.resumed,
    };
  },

  /**
   * Makes a PENDING refund due again at `at`: at once when the provider could not answer, later when it has
   * not settled the refund yet. It stays marked as attempted, so the next attempt asks first.
   */
  async retryAt(em: Em, installmentId: string, at: Date): Promise<void> {
    await sql(
      em,
      "update installments set refund_next_attempt_at = $2 where id = $1 and refund_status = 'PENDING'",
      [installmentId, at],
    );
  },

  /** A refund owed, locked until the transaction ends, with its disbursement's owner. */
  async lock(tx: Em, installmentId: string): Promise<LockedRefund | undefined> {
    const [row] = await sql<{
      id: string;
      refund_status: LockedRefund["status"];
      amount_kobo: string;
      disbursement_id: string;
      partner_id: string;
      environment: Environment;
      user_id: string;
    }>(
      tx,
      `select i.id, i.refund_status, i.amount_kobo::text, d.id as disbursement_id, d.partner_id, d.environment,
              d.user_id
         from installments i join disbursements d on d.id = i.disbursement_id
        where i.id = $1 and i.refund_status is not null
          for update of i`,
      [installmentId],
    );
    if (!row) return undefined;
    return {
      installmentId: row.id,
      status: row.refund_status,
      amountKobo: BigInt(row.amount_kobo),
      disbursementId: row.disbursement_id,
      partnerId: row.partner_id,
      environment: row.environment,
      userId: row.user_id,
    };
  },

  /** Records a PENDING refund REFUNDED (the row is locked by {@link lock}). */
  async refunded(tx: Em, installmentId: string, at: Date): Promise<void> {
    await sql(
      tx,
      `update installments set refund_status = 'REFUNDED', refunded_at = $2, refund_next_attempt_at = null
        where id = $1 and refund_status = 'PENDING'`,
      [installmentId, at],
    );
  },

  /** Records a PENDING refund FAILED with the provider's reason (the row is locked by {@link lock}). */
  async failed(tx: Em, installmentId: string, reason: string): Promise<void> {
    await sql(
      tx,
      `update installments set refund_status = 'FAILED', refund_failure = $2, refund_next_attempt_at = null
        where id = $1 and refund_status = 'PENDING'`,
      [installmentId, reason],
    );
  },

  /**
   * PENDING refunds due now, oldest first: past their last attempt's lease or recheck, or never attempted
   * though owed (reversed, or collected after the reversal) since before `unattemptedBefore`: their job was
   * lost. A refund just owed is left to its job, so the sweep does not race it.
   */
  async due(em: Em, now: Date, unattemptedBefore: Date, limit: number): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      em,
      `select i.id from installments i join disbursements d on d.id = i.disbursement_id
        where i.refund_status = 'PENDING'
          and (i.refund_next_attempt_at <= $1
               or (i.refund_next_attempt_at is null and greatest(d.reversed_at, i.collected_at) <= $2))
        order by i.refund_next_attempt_at nulls first limit $3`,
      [now, unattemptedBefore, limit],
    );
    return rows.map((r) => r.id);
  },

  /** The PENDING refund owed on the charge `chargeReference`, in an environment (for the provider's webhook). */
  async pendingByCharge(
    em: Em,
    environment: Environment,
    chargeReference: string,
  ): Promise<{ installmentId: string; reference: string; amountKobo: bigint } | undefined> {
    const [row] = await sql<{ id: string; refund_reference: string; amount_kobo: string }>(
      em,
      `select i.id, i.refund_reference, i.amount_kobo::text
         from installments i join disbursements d on d.id = i.disbursement_id
        where i.collected_reference = $1 and d.environment = $2 and i.refund_status = 'PENDING'`,
      [chargeReference, environment],
    );
    return row
      ? { installmentId: row.id, reference: row.refund_reference, amountKobo: BigInt(row.amount_kobo) }
      : undefined;
  },

  /**
   * The sandbox simulator's refund of a charge, made once: the first call records it (SUCCESS when the
   * simulator collected that charge, for at least this amount; FAILED otherwise), and every call answers the
   * refund recorded against the charge.
   */
  async simulatedRefund(
    em: Em,
    reference: string,
    chargeReference: string,
    amountKobo: bigint,
  ): Promise<{ status: string; failure_reason: string | null; amount_kobo: string } | undefined> {
    await sql(
      em,
      `insert into sandbox_refunds (reference, charge_reference, amount_kobo, status, failure_reason, created_at)
       select $1, $2, $3, case when ok then 'SUCCESS' else 'FAILED' end,
              case when ok then null else 'charge_not_refundable' end, now()
         from (select exists (select 1 from sandbox_debits
                               where reference = $2 and status = 'SUCCESS' and amount_kobo >= $3) as ok) c
       on conflict do nothing`,
      [reference, chargeReference, amountKobo.toString()],
    );
    const [row] = await sql<{ status: string; failure_reason: string | null; amount_kobo: string }>(
      em,
      "select status, failure_reason, amount_kobo::text from sandbox_refunds where charge_reference = $1",
      [chargeReference],
    );
    return row;
  },
};
