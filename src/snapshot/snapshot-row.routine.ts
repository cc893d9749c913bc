import { Routine } from "@mikro-orm/core";
import { SNAPSHOT_QUERY } from "./snapshot.repository.ts";

/**
 * The function's body: the snapshot's query after the check, `today` ($5) read once as a date. The migration that
 * creates the function holds a copy; the schema test fails while the two differ (a change to the query is a
 * migration that replaces the function).
 */
function routineBody(query: string): string {
  return `
    #variable_conflict use_column
    declare
      v_today date := $5::date;
    begin
      if $8 is not null and not replica_has_applied($8) then
        return;
      end if;
      return query
      ${query.replaceAll("$5::date", "v_today")};
    end`;
}

/**
 * `snapshot_row(partner, environment, user, window days, today, history scopes, ledger scopes, after)`: the
 * snapshot's query ({@link SNAPSHOT_QUERY}) for replicas and poolers. A PL/pgSQL function, for two reasons:
 * - its query's plan is kept per session (generic after five runs, as a prepared statement's is), behind a pooler
 *   in transaction mode too, where a named prepared statement cannot be used;
 * - on a replica, `after` (a WAL position of the primary, or null on the primary) is checked first with
 *   `replica_has_applied`, and the query then runs on a snapshot taken after the check (a volatile function takes
 *   a fresh one for each statement): a read sees everything the primary had committed when it began, a revoked
 *   consent included, in one round trip. No row when the replica has not applied `after` yet.
 * Created by `Migration20261203000000_replica_reads` (a change to the query is a migration that replaces it),
 * declared here for MikroORM's schema diff.
 */
export const SnapshotRow = new Routine({
  name: "snapshot_row",
  type: "function",
  language: "plpgsql",
  params: {
    p_partner: { type: "text", runtimeType: "string" },
    p_environment: { type: "text", runtimeType: "string" },
    p_user_id: { type: "text", runtimeType: "string" },
    p_window_days: { type: "integer", runtimeType: "number" },
    p_today: { type: "text", runtimeType: "string" },
    p_history_scopes: { type: "text[]", runtimeType: "any" },
    p_ledger_scopes: { type: "text[]", runtimeType: "any" },
    p_after: { type: "pg_lsn", runtimeType: "string" },
  },
  returns: {
    runtimeType: "object",
    columnType:
      'table (consent json, segment text, standing json, kyc json, parties json, "window" json, cash json, history json)',
  },
  body: routineBody(SNAPSHOT_QUERY),
});
