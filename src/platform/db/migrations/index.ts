import { Migration20261122000000_foundation } from "./Migration20261122000000_foundation.ts";
import { Migration20261122010000_webhooks } from "./Migration20261122010000_webhooks.ts";
import { Migration20261122020000_consent } from "./Migration20261122020000_consent.ts";
import { Migration20261122030000_snapshots } from "./Migration20261122030000_snapshots.ts";
import { Migration20261122040000_disbursements } from "./Migration20261122040000_disbursements.ts";
import { Migration20261122050000_payment_providers } from "./Migration20261122050000_payment_providers.ts";
import { Migration20261122060000_sandbox } from "./Migration20261122060000_sandbox.ts";
import { Migration20261122070000_data_keys } from "./Migration20261122070000_data_keys.ts";
import { Migration20261123000000_person } from "./Migration20261123000000_person.ts";
import { Migration20261123010000_mandates } from "./Migration20261123010000_mandates.ts";
import { Migration20261123020000_refunds } from "./Migration20261123020000_refunds.ts";
import { Migration20261123100000_retention } from "./Migration20261123100000_retention.ts";
import { Migration20261123110000_webhook_circuits } from "./Migration20261123110000_webhook_circuits.ts";
import { Migration20261123120000_repayment_histories } from "./Migration20261123120000_repayment_histories.ts";
import { Migration20261123121000_sandbox_isolation } from "./Migration20261123121000_sandbox_isolation.ts";
import { Migration20261123130000_disbursement_daily_limit } from "./Migration20261123130000_disbursement_daily_limit.ts";
import { Migration20261124100000_limit_overrides } from "./Migration20261124100000_limit_overrides.ts";
import { Migration20261126000000_portal } from "./Migration20261126000000_portal.ts";
import { Migration20261127100000_webhook_portal } from "./Migration20261127100000_webhook_portal.ts";
import { Migration20261127200000_partner_lists } from "./Migration20261127200000_partner_lists.ts";
import { Migration20261128000000_invite_wrong_codes } from "./Migration20261128000000_invite_wrong_codes.ts";
import { Migration20261128010000_counterparty_window } from "./Migration20261128010000_counterparty_window.ts";
import { Migration20261128020000_counterparty_window_scope } from "./Migration20261128020000_counterparty_window_scope.ts";
import { Migration20261129000000_instance_listeners } from "./Migration20261129000000_instance_listeners.ts";
import { Migration20261130000000_partitioned_history } from "./Migration20261130000000_partitioned_history.ts";
import { Migration20261201000000_delivery_owner_statistics } from "./Migration20261201000000_delivery_owner_statistics.ts";
import { Migration20261202000000_counterparty_days } from "./Migration20261202000000_counterparty_days.ts";
import { Migration20261203000000_replica_reads } from "./Migration20261203000000_replica_reads.ts";
import { Migration20261204000000_request_log } from "./Migration20261204000000_request_log.ts";
import { Migration20261205000000_event_subjects } from "./Migration20261205000000_event_subjects.ts";
import { Migration20261206000000_disbursement_trace } from "./Migration20261206000000_disbursement_trace.ts";

/** Every migration, oldest first. Listed explicitly so no file discovery is needed at run time. */
export const migrations = [
  { name: "Migration20261122000000_foundation", class: Migration20261122000000_foundation },
  { name: "Migration20261122010000_webhooks", class: Migration20261122010000_webhooks },
  { name: "Migration20261122020000_consent", class: Migration20261122020000_consent },
  { name: "Migration20261122030000_snapshots", class: Migration20261122030000_snapshots },
  { name: "Migration20261122040000_disbursements", class: Migration20261122040000_disbursements },
  { name: "Migration20261122050000_payment_providers", class: Migration20261122050000_payment_providers },
  { name: "Migration20261122060000_sandbox", class: Migration20261122060000_sandbox },
  { name: "Migration20261122070000_data_keys", class: Migration20261122070000_data_keys },
  { name: "Migration20261123000000_person", class: Migration20261123000000_person },
  { name: "Migration20261123010000_mandates", class: Migration20261123010000_mandates },
  { name: "Migration20261123020000_refunds", class: Migration20261123020000_refunds },
  { name: "Migration20261123100000_retention", class: Migration20261123100000_retention },
  { name: "Migration20261123110000_webhook_circuits", class: Migration20261123110000_webhook_circuits },
  { name: "Migration20261123120000_repayment_histories", class: Migration20261123120000_repayment_histories },
  { name: "Migration20261123121000_sandbox_isolation", class: Migration20261123121000_sandbox_isolation },
  {
    name: "Migration20261123130000_disbursement_daily_limit",
    class: Migration20261123130000_disbursement_daily_limit,
  },
  { name: "Migration20261124100000_limit_overrides", class: Migration20261124100000_limit_overrides },
  { name: "Migration20261126000000_portal", class: Migration20261126000000_portal },
  { name: "Migration20261127100000_webhook_portal", class: Migration20261127100000_webhook_portal },
  { name: "Migration20261127200000_partner_lists", class: Migration20261127200000_partner_lists },
  { name: "Migration20261128000000_invite_wrong_codes", class: Migration20261128000000_invite_wrong_codes },
  { name: "Migration20261128010000_counterparty_window", class: Migration20261128010000_counterparty_window },
  {
    name: "Migration20261128020000_counterparty_window_scope",
    class: Migration20261128020000_counterparty_window_scope,
  },
  { name: "Migration20261129000000_instance_listeners", class: Migration20261129000000_instance_listeners },
  { name: "Migration20261130000000_partitioned_history", class: Migration20261130000000_partitioned_history },
  {
    name: "Migration20261201000000_delivery_owner_statistics",
    class: Migration20261201000000_delivery_owner_statistics,
  },
  { name: "Migration20261202000000_counterparty_days", class: Migration20261202000000_counterparty_days },
  { name: "Migration20261203000000_replica_reads", class: Migration20261203000000_replica_reads },
  { name: "Migration20261204000000_request_log", class: Migration20261204000000_request_log },
  { name: "Migration20261205000000_event_subjects", class: Migration20261205000000_event_subjects },
  { name: "Migration20261206000000_disbursement_trace", class: Migration20261206000000_disbursement_trace },
];
