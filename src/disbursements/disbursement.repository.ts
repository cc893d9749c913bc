import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Environment, everyTenant, tenantOf } from "../platform/tenancy.ts";
import { type Disbursement, DisbursementEntity } from "./disbursement.entity.ts";
import { type Installment, InstallmentEntity } from "./installment.entity.ts";
import { repaymentHistoryRepository } from "./repayment-history.repository.ts";

/**
 * The lender scope of a loan's repayment history: in production history spans every lender (`''`); in sandbox
 * each partner's loans are its own, so one sandbox partner never sees another's.
 */
export const lenderScope = (d: { environment: Environment; partnerId: string }): string =>
  d.environment === "production" ? "" : d.partnerId;

/**
 * A `disbursements` row read by a raw statement (`select *`, `returning *`), as the entity, through the
 * entity's own column mapping. Kept out of the unit of work's identity map: these rows are settled next by raw
 * statements, and a copy left there would be stale for the next `find` in the request.
 */
export function disbursementOf(em: Em, row: Record<string, unknown>): Disbursement {
  return em.map(DisbursementEntity, row, { disableIdentityMap: true });
}

/** What the daily limit's count and the insert of a new disbursement answer. */
export interface CountedInsert {
  /** The partner's disbursements for the user in the day, before this one. */
  createdToday: number;
  /** False when nothing was written: the user is at the limit, or the reference is taken. */
  inserted: boolean;
}

/**
 * The `disbursements` rows and their schedules as a partner and the mandate page see them. A partner's reads
 * go through the tenancy filter; the payout, debit and refund workers, which serve every tenant, have their
 * own repositories (payout, collection, refund) with raw statements that claim rows with leases.
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
    return row && disbursementOf(tx, row);
  },

  /**
   * A disbursement, locked, whoever's it is (settling what the provider said). Raw: it runs for every payout,
   * where the entity lock and flush cost more CPU than the statements.
   */
  async lock(tx: Em, id: string): Promise<Disbursement | undefined> {
    const [row] = await sql(tx, "select * from disbursements where id = $1 for update", [id]);
    return row && disbursementOf(tx, row);
  },

  /** A disbursement by its mandate page's token (the page knows no tenant), locked when asked. */
  async findByAcceptanceToken(em: Em, tokenHash: Buffer, lock: boolean): Promise<Disbursement | undefined> {
    const [row] = await sql(
      em,
      `select * from disbursements where acceptance_token_hash = $1${lock ? " for update" : ""}`,
      [tokenHash],
    );
    return row && disbursementOf(em, row);
  },

  /** A disbursement, whoever's it is (the platform's prompt session names it). */
  async findAny(em: Em, id: string): Promise<Disbursement | undefined> {
    const [row] = await sql(em, "select * from disbursements where id = $1", [id]);
    return row && disbursementOf(em, row);
  },

  /**
   * Takes a transaction advisory lock on a partner, environment and user (held until the transaction ends),
   * so the creates of one user's disbursements count one after another: see {@link insertCounted}.
   */
  async lockUserDay(tx: Em, owner: { partnerId: string; environment: Environment }, userId: string) {
    await sql(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `disbursements_per_user:${owner.partnerId}:${owner.environment}:${userId}`,
    ]);
  },

  /**
   * Counts the disbursements the partner created for the user in the environment in `day` and, when there
   * are fewer than `limit`, adds this one with its schedule (one row per installment, debited at
   * `debitHourUtc` on each due date) unless the partner already used its reference; one statement.
   * Run after {@link lockUserDay} in the same transaction: the count is this statement's snapshot, taken
   * once the lock is held, so under READ COMMITTED it sees every create that went before it, and two creates
   * can never both pass at the limit. The range is read from `disbursements_by_owner_user_day`.
   */
  async insertCounted(
    tx: Em,
    d: Disbursement,
    installments: { dueDate: string; amountKobo: bigint }[],
    rules: { day: { from: Date; until: Date }; limit: number; debitHourUtc: number },
  ): Promise<CountedInsert> {
    const [row] = await sql<{ n: number; inserted: number }>(
      tx,
      `with today as (
         select count(*)::int as n from disbursements
          where partner_id = $2 and environment = $3 and user_id = $4 and created_at >= $22 and created_at < $23),
       d as (
         insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo,
           fee_rate_bps, destination, reference, schedule_accepted_at, failure_reason, provider, created_at,
           processing_at, delivered_at, failed_at, reversed_at, acceptance_token_hash, acceptance_token_enc,
           acceptance_expires_at, trace_parent)
         select $1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::bigint, $8::int, $9::text,
                $10::text, $11::timestamptz, $12::text, $13::text, $14::timestamptz, $15::timestamptz,
                $16::timestamptz, $17::timestamptz, $18::timestamptz, $19::bytea, $20::bytea, $21::timestamptz,
                $28::text
           from today where today.n < $24
         on conflict (partner_id, environment, reference) do nothing
         returning id),
       schedule as (
         insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, next_attempt_at)
         select 'rpy_' || substr(d.id, 5) || '_' || t.s, d.id, t.s, t.due::date, t.amount, 'SCHEDULED',
                (t.due::date + make_interval(hours => $27::int)) at time zone 'UTC'
           from d, unnest($25::text[], $26::bigint[]) with ordinality as t (due, amount, s))
       select (select n from today) as n, (select count(*)::int from d) as inserted`,
      [
        ...insertParams(d),
        rules.day.from,
        rules.day.until,
        rules.limit,
        installments.map((i) => i.dueDate),
        installments.map((i) => i.amountKobo.toString()),
        rules.debitHourUtc,
        d.traceParent,
      ],
    );
    return { createdToday: row?.n ?? 0, inserted: row?.inserted === 1 };
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

  /** Writes the changes made to loaded rows. */
  save(em: Em): Promise<void> {
    return em.flush();
  },

  /** The user's repayment history roll-ups, recomputed (see {@link repaymentHistoryRepository}). */
  refreshHistory: repaymentHistoryRepository.refresh,
};

/** The first 21 parameters of a new disbursement's insert, in the order of its columns. */
function insertParams(d: Disbursement): unknown[] {
  return [
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
  ];
}
