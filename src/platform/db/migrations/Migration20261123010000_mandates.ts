import { Migration } from "@mikro-orm/migrations";

/**
 * Repayment mandates (CONTRACT.md §6): a disbursement waits AWAITING_ACCEPTANCE until the person accepts its
 * schedule on a hosted page (or is CANCELLED), and keeps the acceptance as the debit authority: how and when
 * the person was authenticated, the schedule and total exactly as shown, and (sealed, for operators) where the
 * answer came from and a hash of the page's terms. `schedule_accepted_at` is now the time of that acceptance.
 */
export class Migration20261123010000_mandates extends Migration {
  override name = "Migration20261123010000_mandates";

  up(): void {
    this.addSql("alter table disbursements drop constraint disbursements_status_check");
    this.addSql(`
      alter table disbursements
        add constraint disbursements_status_check check (status in ('AWAITING_ACCEPTANCE', 'PENDING',
          'PROCESSING', 'DELIVERED', 'FAILED', 'REVERSED', 'CANCELLED')),
        alter column schedule_accepted_at drop not null,
        add column acceptance_token_hash bytea,
        add column acceptance_token_enc bytea,
        add column acceptance_expires_at timestamptz,
        add column acceptance_method text
          constraint disbursements_acceptance_method_check check (acceptance_method in ('OTP_SMS', 'PLATFORM_SESSION')),
        add column accepted_schedule jsonb,
        add column accepted_total_kobo bigint,
        add column acceptance_evidence_enc bytea,
        add column acceptance_terms_hash bytea,
        add column cancelled_at timestamptz`);
    this.addSql(
      "create unique index disbursements_acceptance_token on disbursements (acceptance_token_hash) where acceptance_token_hash is not null",
    );
    this.addSql(
      "create index disbursements_awaiting on disbursements (acceptance_expires_at) where status = 'AWAITING_ACCEPTANCE'",
    );
    // Disbursements made before mandates were accepted by the partner's word: their schedule stands as the
    // accepted one, so the debit-time bounds hold for them too.
    this.addSql(`
      update disbursements d set accepted_total_kobo = t.total, accepted_schedule = t.schedule
        from (select disbursement_id, sum(amount_kobo) as total,
                     jsonb_agg(jsonb_build_object('dueDate', due_date::text, 'amountKobo', amount_kobo::text)
                               order by seq) as schedule
                from installments group by disbursement_id) t
       where t.disbursement_id = d.id`);
  }
}
