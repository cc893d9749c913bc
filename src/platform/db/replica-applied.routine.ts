import { Routine } from "@mikro-orm/core";

/**
 * `replica_has_applied(target)`: on a streaming replica, true when it has applied every complete WAL record up
 * to `target`, a flush position of its primary, so that a snapshot taken after the call returns sees every
 * transaction the primary had acknowledged by then; false when it has not (and on a server not in recovery).
 *
 * Usually `pg_last_wal_replay_lsn()` has reached `target`. But the primary's WAL writer flushes whole pages, so
 * its flush position may fall inside a record that continues on the next page (a rate limiter's commit, which
 * does not wait for the flush): the replica cannot replay up to a position inside a record, and waits for the
 * rest. It has then applied everything before that record, every acknowledged commit among it, which shows as
 * having received WAL up to `target` and, read after that, its startup process waiting for more WAL
 * (`RecoveryWalStream`; `pg_stat_activity` shows it to superusers and to members of `pg_read_all_stats`). A
 * function, so a check and what a caller reads after it (in a volatile function, or the next statement) need no
 * more round trips. Created by `Migration20261203000000_replica_reads`, declared here for MikroORM's schema diff.
 */
export const ReplicaHasApplied = new Routine({
  name: "replica_has_applied",
  type: "function",
  language: "plpgsql",
  params: { p_target: { type: "pg_lsn", runtimeType: "string" } },
  returns: { runtimeType: "boolean", columnType: "boolean" },
  body: `
      begin
        if pg_last_wal_replay_lsn() >= p_target then
          return true;
        end if;
        if coalesce(pg_last_wal_receive_lsn() < p_target, true) then
          return false;
        end if;
        return exists (select 1 from pg_stat_activity where backend_type = 'startup' and wait_event = 'RecoveryWalStream');
      end`,
});
