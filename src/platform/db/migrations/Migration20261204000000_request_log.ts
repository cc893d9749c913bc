import { Migration } from "@mikro-orm/migrations";

/**
 * The request log (proto/partner/v1/requests.proto): one row per call made with a partner's API key, kept 30
 * days, in daily range partitions by `req_` id, created ahead and dropped whole by the service
 * (request-log.repository.ts): a day's purge is a detach and a drop, whatever the day held. The parent has no
 * partition yet: the first `api` to start creates today's and the days after it.
 */
export class Migration20261204000000_request_log extends Migration {
  override name = "Migration20261204000000_request_log";

  up(): void {
    this.addSql(`
      create table request_log (
        id text not null,
        partner_id text not null,
        environment text check (environment in ('sandbox', 'production')) not null,
        api_key_id text not null,
        method text not null,
        route text not null,
        face text not null,
        status smallint not null,
        error_code text null,
        duration_us integer not null,
        error jsonb null,
        constraint request_log_pkey primary key (partner_id, environment, id)
      ) partition by range (id)`);
    this.addSql(
      "create index request_log_failed_by_owner on request_log (partner_id, environment, id) where status >= 400",
    );
  }
}
