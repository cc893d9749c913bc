import { LockMode } from "@mikro-orm/core";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Environment, everyTenant, tenantOf } from "../platform/tenancy.ts";
import { type Disbursement, DisbursementEntity } from "./disbursement.entity.ts";
import { type Installment, InstallmentEntity } from "./installment.entity.ts";

/** A debit claimed for one attempt, with what the provider needs to be asked. */
export interface ClaimedDebit {
  installment: Installment;
  userId: string;
  reference: string;
  environment: Environment;
  /** The attempt's provider reference was already in flight (a retry): ask before charging. */
  wasPending: boolean;
}

/** The installment of a debit in flight, locked, with its disbursement. */
export interface PendingDebit {
  installment: Installment;
  disbursement: Disbursement;
}

/** A `date` column read raw is `YYYY-MM-DD` text already, or a Date at midnight UTC. */
function dayOf(value: unknown): string {
  return value instanceof Date ? value.toISOString().slice(0, 10) : String(value);
}

/**
 * Claims a due installment for one attempt (see {@link collectionRepository.claim}). The person's acceptance
 * is the debit authority: no debit above its accepted installment, and the debits of a disbursement never
 * above the accepted total (CONTRACT.md §6).
 */
const CLAIM = `
  update installments i
     set attempts = i.attempts + case when old.previous_reference is null then 1 else 0 end,
         pending_reference = coalesce(old.previous_reference, i.id || ':' || (i.attempts + 1)),
         next_attempt_at = $2::timestamptz + make_interval(secs => $3::double precision / 1000)
    from disbursements d,
         (select id as old_id, pending_reference as previous_reference from installments
           where id = $1 and status = 'SCHEDULED' and next_attempt_at <= $2 for update) old
   where i.id = old.old_id and d.id = i.disbursement_id
     and (d.status = 'DELIVERED' or old.previous_reference is not null)
     and d.accepted_total_kobo is not null
     and i.amount_kobo <= (d.accepted_schedule -> (i.seq - 1) ->> 'amountKobo')::bigint
     and i.amount_kobo + (select coalesce(sum(x.amount_kobo), 0) from installments x
                           where x.disbursement_id = d.id and x.id <> i.id
                             and (x.status = 'COLLECTED' or x.pending_reference is not null))
         <= d.accepted_total_kobo
  returning i.*, d.user_id as d_user_id, d.reference as d_reference, d.environment as d_environment,
            old.previous_reference is not null as was_pending`;

/**
 * The debit worker's statements on `installments`: repayments collected by direct debit when due. The worker
 * serves every tenant, so it claims rows with leases in raw statements and says so with {@link everyTenant}
 * on entity queries.
 */
export const collectionRepository = {
  /**
   * Claims a due installment for one debit attempt, with a lease: a new attempt gets a new provider
   * reference (`rpy_…:<attempt>`), kept as the pending reference until its outcome is recorded; an attempt
   * still pending keeps its reference, so the provider is asked about it instead of charged again.
   */
  async claim(em: Em, installmentId: string, now: Date, leaseMs: number): Promise<ClaimedDebit | undefined> {
    const [row] = await sql<
      Record<string, unknown> & {
        d_user_id: string;
        d_reference: string;
        d_environment: Environment;
        was_pending: boolean;
      }
    >(em, CLAIM, [installmentId, now, leaseMs]);
    if (!row) return undefined;
    const { d_user_id, d_reference, d_environment, was_pending, ...columns } = row;
    return {
      installment: em.map(InstallmentEntity, { ...columns, due_date: dayOf(columns.due_date) }),
      userId: d_user_id,
      reference: d_reference,
      environment: d_environment,
      wasPending: was_pending,
    };
  },

  /** The installment whose debit is in flight under `reference`, locked, with its disbursement. */
  async lockPending(tx: Em, reference: string): Promise<PendingDebit | undefined> {
    // The disbursement first, then the installment: the order a reversal takes them in (it locks the
    // disbursement, then cancels and refunds its installments), so the two wait for each other in turn
    // instead of deadlocking.
    await sql(
      tx,
      `select d.id from disbursements d join installments i on i.disbursement_id = d.id
        where i.pending_reference = $1 for update of d`,
      [reference],
    );
    // An installment's disbursement carries the tenancy filter, and MikroORM joins it in to apply it: the
    // worker serves every tenant, so it says so.
    const installment = await tx.findOne(
      InstallmentEntity,
      { pendingReference: reference },
      { lockMode: LockMode.PESSIMISTIC_WRITE, ...everyTenant },
    );
    if (!installment) return undefined;
    const disbursement = await tx.findOne(
      DisbursementEntity,
      { id: installment.disbursementId },
      everyTenant,
    );
    return disbursement ? { installment, disbursement } : undefined;
  },

  /** The debit in flight under a provider reference, in an environment (for the provider's webhook). */
  async pending(
    em: Em,
    environment: Environment,
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

  /** Installments due now whose disbursement was delivered (or whose debit is in flight). */
  async due(em: Em, now: Date, limit: number): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      em,
      `select i.id from installments i join disbursements d on d.id = i.disbursement_id
        where i.status = 'SCHEDULED' and i.next_attempt_at <= $1
          and (d.status = 'DELIVERED' or i.pending_reference is not null)
        order by i.next_attempt_at limit $2`,
      [now, limit],
    );
    return rows.map((r) => r.id);
  },

  /** An installment of a disbursement of `em`'s tenant, locked, with its disbursement. */
  async lockOwned(tx: Em, id: string): Promise<PendingDebit | undefined> {
    // The disbursement first, as a reversal and a debit's settlement take them (see lockPending).
    const tenant = tenantOf(tx);
    await sql(
      tx,
      `select d.id from disbursements d join installments i on i.disbursement_id = d.id
        where i.id = $1 and d.partner_id = $2 and d.environment = $3 for update of d`,
      [id, tenant.partnerId, tenant.environment],
    );
    const installment = await tx.findOne(InstallmentEntity, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!installment) return undefined;
    // The tenancy filter decides: another partner's disbursement is simply not found.
    const disbursement = await tx.findOne(DisbursementEntity, { id: installment.disbursementId });
    return disbursement ? { installment, disbursement } : undefined;
  },
};
