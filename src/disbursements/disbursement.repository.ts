import { LockMode } from "@mikro-orm/core";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Environment, everyTenant, tenantOf } from "../platform/tenancy.ts";
import { type Disbursement, DisbursementEntity } from "./disbursement.entity.ts";
import type { PastLoan } from "./disbursement.service.ts";
import { type Installment, InstallmentEntity } from "./installment.entity.ts";

/**
 * The lender scope of a loan's repayment history: in production history spans every lender (`''`); in sandbox
 * each partner's loans are its own, so one sandbox partner never sees another's.
 */
export const lenderScope = (d: { environment: Environment; partnerId: string }): string =>
  d.environment === "production" ? "" : d.partnerId;

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

/** A `disbursements` row as read by a raw statement (`select *`, `returning *`). */
function disbursementOf(r: Record<string, unknown>): Disbursement {
  return {
    id: r.id as string,
    partnerId: r.partner_id as string,
    environment: r.environment as Environment,
    userId: r.user_id as string,
    status: r.status as Disbursement["status"],
    principalKobo: BigInt(r.principal_kobo as string),
    feeKobo: BigInt(r.fee_kobo as string),
    feeRateBps: r.fee_rate_bps as number,
    destination: r.destination as Disbursement["destination"],
    reference: r.reference as string,
    scheduleAcceptedAt: r.schedule_accepted_at as Date | null,
    failureReason: r.failure_reason as string | null,
    provider: r.provider as string,
    createdAt: r.created_at as Date,
    processingAt: r.processing_at as Date | null,
    deliveredAt: r.delivered_at as Date | null,
    failedAt: r.failed_at as Date | null,
    reversedAt: r.reversed_at as Date | null,
    acceptanceTokenHash: r.acceptance_token_hash as Buffer | null,
    acceptanceTokenEnc: r.acceptance_token_enc as Buffer | null,
    acceptanceExpiresAt: r.acceptance_expires_at as Date | null,
    acceptanceMethod: r.acceptance_method as Disbursement["acceptanceMethod"],
    acceptedSchedule: r.accepted_schedule as Disbursement["acceptedSchedule"],
    acceptedTotalKobo: r.accepted_total_kobo == null ? null : BigInt(r.accepted_total_kobo as string),
    acceptanceEvidenceEnc: r.acceptance_evidence_enc as Buffer | null,
    acceptanceTermsHash: r.acceptance_terms_hash as Buffer | null,
    cancelledAt: r.cancelled_at as Date | null,
  };
}

/**
 * The disbursements feature's tables (disbursements, installments, and the sandbox simulator's
 * sandbox_transfers and sandbox_debits): the only code that reads or writes them. A partner's reads go through
 * the tenancy filter; the payout and debit workers, which serve every tenant, claim rows with leases in raw
 * statements and say so with {@link everyTenant} on entity queries.
 */
export const disbursementRepository = {
  /** A disbursement of `em`'s tenant. */
  find(em: Em, id: string): Promise<Disbursement | null> {
    return em.findOne(DisbursementEntity, { id });
  },

  /** A disbursement of an environment, whoever's it is (the provider's webhook names it by our id). */
  findInEnvironment(em: Em, environment: Environment, id: string): Promise<Disbursement | null> {
    return em.findOne(DisbursementEntity, { id, environment }, everyTenant);
  },

  /**
   * A disbursement of `em`'s tenant, locked until the transaction ends. Raw like {@link lock}, which settles
   * it next: a row read here never sits in the unit of work's identity map, stale once settled.
   */
  async findLocked(tx: Em, id: string): Promise<Disbursement | undefined> {
    const tenant = tenantOf(tx);
    const [row] = await sql(
      tx,
      "select * from disbursements where id = $1 and partner_id = $2 and environment = $3 for update",
      [id, tenant.partnerId, tenant.environment],
    );
    return row && disbursementOf(row);
  },

  /**
   * A disbursement, locked, whoever's it is (settling what the provider said). With {@link settle}, raw: it
   * runs for every payout, where the entity lock and flush cost more CPU than the statements.
   */
  async lock(tx: Em, id: string): Promise<Disbursement | undefined> {
    const [row] = await sql(tx, "select * from disbursements where id = $1 for update", [id]);
    return row && disbursementOf(row);
  },

  /** Writes a settled payout's new status and its times (the row is locked by {@link lock}). */
  async settle(
    tx: Em,
    id: string,
    change: Pick<Disbursement, "status"> &
      Partial<Pick<Disbursement, "failureReason" | "deliveredAt" | "failedAt" | "reversedAt">>,
  ): Promise<void> {
    await sql(
      tx,
      `update disbursements set status = $2, failure_reason = coalesce($3, failure_reason),
         delivered_at = coalesce($4, delivered_at), failed_at = coalesce($5, failed_at),
         reversed_at = coalesce($6, reversed_at)
       where id = $1`,
      [
        id,
        change.status,
        change.failureReason ?? null,
        change.deliveredAt ?? null,
        change.failedAt ?? null,
        change.reversedAt ?? null,
      ],
    );
  },

  /**
   * Adds a disbursement; false when the partner already used its reference in that environment. Raw: it is
   * the money hot path, where the entity insert (change set, flush) cost more CPU than the statement.
   */
  async insert(tx: Em, d: Disbursement): Promise<boolean> {
    const rows = await sql(
      tx,
      `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo,
         fee_rate_bps, destination, reference, schedule_accepted_at, failure_reason, provider, created_at,
         processing_at, delivered_at, failed_at, reversed_at, acceptance_token_hash, acceptance_token_enc,
         acceptance_expires_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
       on conflict (partner_id, environment, reference) do nothing
       returning id`,
      [
        d.id,
        d.partnerId,
        d.environment,
        d.userId,
        d.status,
        d.principalKobo.toString(),
        d.feeKobo.toString(),
        d.feeRateBps,
        d.destination,
        d.reference,
        d.scheduleAcceptedAt,
        d.failureReason,
        d.provider,
        d.createdAt,
        d.processingAt,
        d.deliveredAt,
        d.failedAt,
        d.reversedAt,
        d.acceptanceTokenHash,
        d.acceptanceTokenEnc,
        d.acceptanceExpiresAt,
      ],
    );
    return rows.length === 1;
  },

  /**
   * Counts the disbursements a partner created for one user in one environment in `[from, until)`, after
   * taking a transaction advisory lock on that partner, environment and user (held until the transaction
   * ends). Concurrent creates for the same user thus count one after another, and each count (a new snapshot
   * under READ COMMITTED) sees every create that went before it: two can never both pass at the limit.
   * The range is read from `disbursements_by_owner_user_day`.
   */
  async lockAndCountForUser(
    tx: Em,
    owner: { partnerId: string; environment: Environment },
    userId: string,
    from: Date,
    until: Date,
  ): Promise<number> {
    await sql(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `disbursements_per_user:${owner.partnerId}:${owner.environment}:${userId}`,
    ]);
    const [row] = await sql<{ n: number }>(
      tx,
      `select count(*)::int as n from disbursements
        where partner_id = $1 and environment = $2 and user_id = $3 and created_at >= $4 and created_at < $5`,
      [owner.partnerId, owner.environment, userId, from, until],
    );
    return row?.n ?? 0;
  },

  /** A disbursement by its mandate page's token (the page knows no tenant), locked when asked. */
  async findByAcceptanceToken(em: Em, tokenHash: Buffer, lock: boolean): Promise<Disbursement | undefined> {
    const [row] = await sql(
      em,
      `select * from disbursements where acceptance_token_hash = $1${lock ? " for update" : ""}`,
      [tokenHash],
    );
    return row && disbursementOf(row);
  },

  /** A disbursement, whoever's it is (the platform's prompt session names it). */
  async findAny(em: Em, id: string): Promise<Disbursement | undefined> {
    const [row] = await sql(em, "select * from disbursements where id = $1", [id]);
    return row && disbursementOf(row);
  },

  /**
   * Records the person's acceptance of an AWAITING_ACCEPTANCE disbursement (locked) and makes it PENDING: the
   * schedule and total as shown, how the person was authenticated, the sealed evidence and the terms' hash.
   */
  async accept(
    tx: Em,
    id: string,
    a: Required<
      Pick<
        Disbursement,
        | "acceptanceMethod"
        | "acceptedSchedule"
        | "acceptedTotalKobo"
        | "acceptanceEvidenceEnc"
        | "acceptanceTermsHash"
        | "scheduleAcceptedAt"
      >
    >,
  ): Promise<boolean> {
    const rows = await sql(
      tx,
      `update disbursements set status = 'PENDING', acceptance_method = $2, accepted_schedule = $3::jsonb,
              accepted_total_kobo = $4, acceptance_evidence_enc = $5, acceptance_terms_hash = $6,
              schedule_accepted_at = $7
        where id = $1 and status = 'AWAITING_ACCEPTANCE' returning id`,
      [
        id,
        a.acceptanceMethod,
        JSON.stringify(a.acceptedSchedule),
        a.acceptedTotalKobo?.toString() ?? null,
        a.acceptanceEvidenceEnc,
        a.acceptanceTermsHash,
        a.scheduleAcceptedAt,
      ],
    );
    return rows.length === 1;
  },

  /** Cancels an AWAITING_ACCEPTANCE disbursement with a reason, and its schedule. */
  async cancelMandate(tx: Em, id: string, reason: string, at: Date): Promise<boolean> {
    const rows = await sql(
      tx,
      `update disbursements set status = 'CANCELLED', failure_reason = $2, cancelled_at = $3
        where id = $1 and status = 'AWAITING_ACCEPTANCE' returning id`,
      [id, reason, at],
    );
    if (rows.length === 0) return false;
    await sql(
      tx,
      "update installments set status = 'CANCELLED', next_attempt_at = null where disbursement_id = $1 and status = 'SCHEDULED'",
      [id],
    );
    return true;
  },

  /** Mandates left unanswered past their time, oldest first. */
  async lapsedMandates(em: Em, now: Date, limit: number): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      em,
      `select id from disbursements where status = 'AWAITING_ACCEPTANCE' and acceptance_expires_at <= $1
        order by acceptance_expires_at limit $2`,
      [now, limit],
    );
    return rows.map((r) => r.id);
  },

  /** Adds the schedule, one row per installment, debited at `debitHourUtc` on each due date. */
  insertSchedule(
    tx: Em,
    disbursementId: string,
    installments: { dueDate: string; amountKobo: bigint }[],
    debitHourUtc: number,
  ): Promise<{ id: string; next_attempt_at: Date }[]> {
    return sql(
      tx,
      `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, next_attempt_at)
       select 'rpy_' || substr($1, 5) || '_' || s, $1, s, d::date, a, 'SCHEDULED',
              (d::date + make_interval(hours => $4)) at time zone 'UTC'
         from unnest($2::text[], $3::bigint[]) with ordinality as t (d, a, s)
       returning id, next_attempt_at`,
      [
        disbursementId,
        installments.map((i) => i.dueDate),
        installments.map((i) => i.amountKobo.toString()),
        debitHourUtc,
      ],
    );
  },

  /**
   * A disbursement's installments, in schedule order. `anyTenant`: for the mandate page and the sandbox
   * helpers' acceptance, which found the disbursement themselves (by its page token, or locked as the caller's).
   */
  schedule(em: Em, disbursementId: string, anyTenant = false): Promise<Installment[]> {
    return em.find(
      InstallmentEntity,
      { disbursementId },
      { orderBy: { seq: "asc" }, ...(anyTenant ? everyTenant : {}) },
    );
  },

  /**
   * Claims a payout for one attempt: PENDING → PROCESSING, or a PROCESSING one whose last attempt's lease
   * (`processing_at` before `leaseBefore`) has passed, so one attempt at a time asks the provider. Returns the
   * disbursement and the status it had, or nothing when another attempt holds it or it is settled.
   */
  async claimPayout(
    em: Em,
    id: string,
    now: Date,
    leaseBefore: Date,
  ): Promise<{ disbursement: Disbursement; previousStatus: string } | undefined> {
    const [row] = await sql<Record<string, unknown> & { previous_status: string }>(
      em,
      `update disbursements set status = 'PROCESSING', processing_at = $2
         from (select id as old_id, status as previous_status from disbursements
                where id = $1 and (status = 'PENDING' or (status = 'PROCESSING' and processing_at <= $3))
                for update) old
        where id = old.old_id
       returning disbursements.*, previous_status`,
      [id, now, leaseBefore],
    );
    if (!row) return undefined;
    return { disbursement: disbursementOf(row), previousStatus: row.previous_status };
  },

  /** Releases a payout's lease at once (the provider could not say what happened: the retry asks again). */
  async releasePayout(em: Em, id: string): Promise<void> {
    await sql(em, "update disbursements set processing_at = $2 where id = $1 and status = 'PROCESSING'", [
      id,
      new Date(0),
    ]);
  },

  /** Payouts left PENDING or PROCESSING since before `before` (their job lost, their worker dead). */
  async stuckPayouts(em: Em, before: Date, limit: number): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      em,
      `select id from disbursements where status in ('PENDING', 'PROCESSING')
          and coalesce(processing_at, created_at) <= $1 order by created_at limit $2`,
      [before, limit],
    );
    return rows.map((r) => r.id);
  },

  /** Writes the changes made to loaded rows. */
  save(em: Em): Promise<void> {
    return em.flush();
  },

  /** Cancels what is left of a schedule; a debit already at the provider is left to settle. */
  async cancelSchedule(tx: Em, disbursementId: string): Promise<void> {
    await sql(
      tx,
      `update installments set status = 'CANCELLED', next_attempt_at = null
        where disbursement_id = $1 and status = 'SCHEDULED' and pending_reference is null`,
      [disbursementId],
    );
  },

  /**
   * Claims a due installment for one debit attempt, with a lease: a new attempt gets a new provider
   * reference (`rpy_…:<attempt>`), kept as the pending reference until its outcome is recorded; an attempt
   * still pending keeps its reference, so the provider is asked about it instead of charged again.
   */
  async claimDebit(
    em: Em,
    installmentId: string,
    now: Date,
    leaseMs: number,
  ): Promise<ClaimedDebit | undefined> {
    const [row] = await sql<
      Record<string, unknown> & {
        d_user_id: string;
        d_reference: string;
        d_environment: Environment;
        was_pending: boolean;
      }
    >(
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
          -- The person's acceptance is the debit authority: no debit above its accepted installment, and the
          -- debits of a disbursement never above the accepted total (CONTRACT.md §6).
          and d.accepted_total_kobo is not null
          and i.amount_kobo <= (d.accepted_schedule -> (i.seq - 1) ->> 'amountKobo')::bigint
          and i.amount_kobo + (select coalesce(sum(x.amount_kobo), 0) from installments x
                                where x.disbursement_id = d.id and x.id <> i.id
                                  and (x.status = 'COLLECTED' or x.pending_reference is not null))
              <= d.accepted_total_kobo
        returning i.*, d.user_id as d_user_id, d.reference as d_reference, d.environment as d_environment,
                  old.previous_reference is not null as was_pending`,
      [installmentId, now, leaseMs],
    );
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
  async lockPendingDebit(tx: Em, reference: string): Promise<PendingDebit | undefined> {
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
  async pendingDebit(
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
  async dueInstallments(em: Em, now: Date, limit: number): Promise<string[]> {
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
  async lockOwnedInstallment(tx: Em, id: string): Promise<PendingDebit | undefined> {
    // The disbursement first, as a reversal and a debit's settlement take them (see lockPendingDebit).
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

  /**
   * Recomputes one user's repayment history roll-ups in one lender scope (see {@link lenderScope}) from their
   * delivered loans, inside the transaction that settled a loan or an installment of theirs. A transaction
   * advisory lock per user and scope orders concurrent settlements, and each statement after it reads what
   * they committed (READ COMMITTED), so the last writer always writes the whole truth. The cost is one pass
   * over this user's loans in this scope, paid at settlement, never on a snapshot read.
   */
  async refreshHistory(tx: Em, userId: string, scope: string): Promise<void> {
    const params = [userId, scope];
    await sql(
      tx,
      "select pg_advisory_xact_lock(hashtextextended('repayment_history:' || $1 || ':' || $2, 0))",
      params,
    );
    const loans = `select d.id, d.principal_kobo from disbursements d
                    where d.user_id = $1 and d.status = 'DELIVERED' and ($2 = '' or d.partner_id = $2)`;
    await sql(
      tx,
      `insert into repayment_histories as h (user_id, lender_scope, loans_taken, loans_repaid, loans_active,
              borrowed_kobo, repaid_kobo, collected, on_time, max_days_late_collected, last_repayment_at)
       select $1, $2, count(*), count(*) filter (where uncollected = 0), count(*) filter (where active),
              coalesce(sum(principal_kobo), 0), coalesce(sum(repaid), 0), coalesce(sum(collected), 0),
              coalesce(sum(on_time), 0), coalesce(max(max_late), 0), max(last_at)
         from (select l.id, l.principal_kobo,
                      count(*) filter (where i.status <> 'COLLECTED') as uncollected,
                      bool_or(i.status = 'SCHEDULED') as active,
                      coalesce(sum(i.amount_kobo) filter (where i.status = 'COLLECTED'), 0) as repaid,
                      count(*) filter (where i.status = 'COLLECTED') as collected,
                      count(*) filter (where i.status = 'COLLECTED'
                                         and (i.collected_at at time zone 'UTC')::date <= i.due_date) as on_time,
                      coalesce(max(greatest(0, (i.collected_at at time zone 'UTC')::date - i.due_date))
                                 filter (where i.status = 'COLLECTED'), 0) as max_late,
                      max(i.collected_at) as last_at
                 from (${loans}) l join installments i on i.disbursement_id = l.id
                group by l.id, l.principal_kobo) per_loan
       on conflict (user_id, lender_scope) do update set loans_taken = excluded.loans_taken,
         loans_repaid = excluded.loans_repaid, loans_active = excluded.loans_active,
         borrowed_kobo = excluded.borrowed_kobo, repaid_kobo = excluded.repaid_kobo,
         collected = excluded.collected, on_time = excluded.on_time,
         max_days_late_collected = excluded.max_days_late_collected, last_repayment_at = excluded.last_repayment_at`,
      params,
    );
    await sql(tx, "delete from repayment_dues where user_id = $1 and lender_scope = $2", params);
    await sql(
      tx,
      `insert into repayment_dues (user_id, lender_scope, due_date, due_count, open_count)
       select $1, $2, i.due_date, count(*), count(*) filter (where i.status <> 'CANCELLED')
         from (${loans}) l join installments i on i.disbursement_id = l.id
        where i.status <> 'COLLECTED'
        group by i.due_date`,
      params,
    );
  },

  /**
   * Locks a partner's sandbox disbursements and their installments for the sandbox reset (so no payout, debit
   * or refund can be claimed meanwhile), and says whether one of them is at the payment provider now.
   */
  async lockSandbox(tx: Em, partnerId: string): Promise<{ busy: boolean }> {
    await sql(
      tx,
      "select id from disbursements where partner_id = $1 and environment = 'sandbox' order by id for update",
      [partnerId],
    );
    await sql(
      tx,
      `select i.id from installments i join disbursements d on d.id = i.disbursement_id
        where d.partner_id = $1 and d.environment = 'sandbox' order by i.id for update of i`,
      [partnerId],
    );
    const [row] = await sql<{ busy: boolean }>(
      tx,
      `select exists (select 1 from disbursements where partner_id = $1 and environment = 'sandbox'
                                                     and status in ('PENDING', 'PROCESSING'))
           or exists (select 1 from installments i join disbursements d on d.id = i.disbursement_id
                       where d.partner_id = $1 and d.environment = 'sandbox'
                         and (i.pending_reference is not null or i.refund_status = 'PENDING')) as busy`,
      [partnerId],
    );
    return { busy: row?.busy === true };
  },

  /**
   * Deletes a partner's sandbox disbursements (locked by {@link lockSandbox}, their books entries gone first),
   * their installments and the repayment history their loans made; returns how many there were.
   */
  async deleteSandbox(tx: Em, partnerId: string): Promise<number> {
    await sql(
      tx,
      `delete from installments i using disbursements d
        where d.id = i.disbursement_id and d.partner_id = $1 and d.environment = 'sandbox'`,
      [partnerId],
    );
    const deleted = await sql(
      tx,
      "delete from disbursements where partner_id = $1 and environment = 'sandbox' returning id",
      [partnerId],
    );
    await sql(tx, "delete from repayment_histories where lender_scope = $1", [partnerId]);
    await sql(tx, "delete from repayment_dues where lender_scope = $1", [partnerId]);
    return deleted.length;
  },

  /** Writes a past loan (sandbox fixtures) as it ended; nothing when its id exists already. */
  async insertPastLoan(tx: Em, loan: PastLoan): Promise<void> {
    const [inserted] = await sql<{ id: string }>(
      tx,
      `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                  destination, reference, schedule_accepted_at, provider, created_at, processing_at, delivered_at)
       values ($1, $2, 'sandbox', $3, 'DELIVERED', $4, 0, 0, 'WALLET', $1, $5, 'sandbox', $5, $5, $5)
       on conflict (id) do nothing returning id`,
      [loan.id, loan.partnerId, loan.userId, loan.principalKobo.toString(), loan.deliveredAt],
    );
    if (!inserted) return;
    const i = loan.installments;
    await sql(
      tx,
      `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, attempts, last_failure,
                                 collected_at, failed_at)
       select t.id, $1, t.seq, t.due::date, t.amount, case when t.collected is null then 'FAILED' else 'COLLECTED' end,
              t.attempts, t.failure, t.collected, t.failed
         from unnest($2::text[], $3::int[], $4::text[], $5::bigint[], $6::int[], $7::text[], $8::timestamptz[],
                     $9::timestamptz[]) as t (id, seq, due, amount, attempts, failure, collected, failed)`,
      [
        loan.id,
        i.map((x) => x.id),
        i.map((_, n) => n + 1),
        i.map((x) => x.dueDate),
        i.map((x) => x.amountKobo.toString()),
        i.map((x) => x.attempts),
        i.map((x) => x.lastFailure),
        i.map((x) => x.collectedAt),
        i.map((x) => x.failedAt),
      ],
    );
  },

  /** The sandbox simulator's recorded answer for a transfer, recorded first as `first` if it has none. */
  async simulatedTransfer(
    em: Em,
    reference: string,
    amountKobo: bigint,
    first: { status: string; reason: string | null },
  ): Promise<{ status: string; failure_reason: string | null } | undefined> {
    await sql(
      em,
      `insert into sandbox_transfers (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now()) on conflict (reference) do nothing`,
      [reference, amountKobo.toString(), first.status, first.reason],
    );
    const [row] = await sql<{ status: string; failure_reason: string | null }>(
      em,
      "select status, failure_reason from sandbox_transfers where reference = $1",
      [reference],
    );
    return row;
  },

  /** Changes the simulator's answer for a transfer (as the provider would), recording it if it had none. */
  async setSimulatedTransfer(
    em: Em,
    reference: string,
    amountKobo: bigint,
    to: { status: "FAILED" | "REVERSED"; reason: string; onlyFrom?: string },
  ): Promise<void> {
    await sql(
      em,
      `insert into sandbox_transfers (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now())
       on conflict (reference) do update set status = excluded.status, failure_reason = excluded.failure_reason
        where $5::text is null or sandbox_transfers.status = $5`,
      [reference, amountKobo.toString(), to.status, to.reason, to.onlyFrom ?? null],
    );
  },

  /** The sandbox simulator's recorded answer for a debit, recorded first as `first` if it has none. */
  async simulatedDebit(
    em: Em,
    reference: string,
    amountKobo: bigint,
    first: { status: string; reason: string | null },
  ): Promise<{ status: string; failure_reason: string | null } | undefined> {
    await sql(
      em,
      `insert into sandbox_debits (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now()) on conflict (reference) do nothing`,
      [reference, amountKobo.toString(), first.status, first.reason],
    );
    const [row] = await sql<{ status: string; failure_reason: string | null }>(
      em,
      "select status, failure_reason from sandbox_debits where reference = $1",
      [reference],
    );
    return row;
  },

  /** Sets the simulator's answer for a debit (as the provider would answer it). */
  async setSimulatedDebit(
    em: Em,
    reference: string,
    amountKobo: bigint,
    to: { status: "SUCCESS" | "FAILED"; reason: string | null },
  ): Promise<void> {
    await sql(
      em,
      `insert into sandbox_debits (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now())
       on conflict (reference) do update set status = excluded.status, failure_reason = excluded.failure_reason`,
      [reference, amountKobo.toString(), to.status, to.reason],
    );
  },
};

/** A `date` column read raw is `YYYY-MM-DD` text already, or a Date at midnight UTC. */
function dayOf(value: unknown): string {
  return value instanceof Date ? value.toISOString().slice(0, 10) : String(value);
}
