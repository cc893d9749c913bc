import { Migration } from "@mikro-orm/migrations";

/** Wrong enrolment codes an invite has seen: at ten it is spent (ConfirmEnrolment). */
export class Migration20261128000000_invite_wrong_codes extends Migration {
  override name = "Migration20261128000000_invite_wrong_codes";

  up(): void {
    this.addSql("alter table portal_invites add column if not exists wrong_codes integer not null default 0");
  }
}
