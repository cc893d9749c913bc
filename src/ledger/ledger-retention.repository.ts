import { deleteCounted } from "../platform/db/purge.ts";
import type { PurgeBatch, PurgeStep } from "../retention/retention.service.ts";

/**
 * The ledger lines sandbox partners' collections and refunds wrote on their copies of the sandbox users (scope
 * other than `''`), once their day is before the cut-off (`LEDGER_LINES_RETENTION_DAYS`, longer than the
 * longest snapshot window, so no snapshot can still count them): the entries, their daily roll-ups, and the
 * counterparties last met before it with their counts per day. The platform's own ledger (scope `''`) is never
 * purged here.
 */
export const sandboxLedgerLinesPurge: PurgeStep = {
  name: "sandbox ledger lines",
  retention: "ledger",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const day = cutoff.toISOString().slice(0, 10);
    const entries = await deleteCounted(
      tx,
      `delete from ledger_entries where id in (
         select id from ledger_entries where scope <> '' and day < $1 limit $2 for update skip locked)
       returning 1`,
      [day, limit],
    );
    const daily = await deleteCounted(
      tx,
      `delete from ledger_daily where (user_id, day, scope) in (
         select user_id, day, scope from ledger_daily where scope <> '' and day < $1 limit $2 for update skip locked)
       returning 1`,
      [day, limit],
    );
    const counterparties = await deleteCounted(
      tx,
      `delete from ledger_counterparties where (user_id, direction, counterparty_hash, scope) in (
         select user_id, direction, counterparty_hash, scope from ledger_counterparties
          where scope <> '' and last_day < $1 limit $2 for update skip locked)
       returning 1`,
      [day, limit],
    );
    // Their counts per last day: the days before the cut-off, which no snapshot window reaches.
    const days = await deleteCounted(
      tx,
      `delete from ledger_counterparty_days where (user_id, direction, scope, last_day) in (
         select user_id, direction, scope, last_day from ledger_counterparty_days
          where scope <> '' and last_day < $1 limit $2 for update skip locked)
       returning 1`,
      [day, limit],
    );
    return {
      picked: entries + daily + counterparties + days,
      deleted: {
        ledger_entries: entries,
        ledger_daily: daily,
        ledger_counterparties: counterparties,
        ledger_counterparty_days: days,
      },
    };
  },
};
