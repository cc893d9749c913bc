import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import {
  dropPartition,
  ensurePartitions,
  listPartitions,
  monthKey,
  monthStart,
  type Partition,
  type PartitionedTable,
} from "../platform/db/partitions.ts";
import { deleteCounted } from "../platform/db/purge.ts";
import { sql } from "../platform/db/sql.ts";
import { retrySchedule } from "./schedule.ts";

/**
 * The webhooks' monthly partitions (docs/operations.md "Partitions"): events by their id, deliveries by theirs,
 * attempts by their delivery's, so one month of a delivery and its attempts is one partition of each.
 */
export const EVENTS: PartitionedTable = { table: "events", prefix: "evt" };
export const DELIVERIES: PartitionedTable = { table: "webhook_deliveries", prefix: "dlv" };
export const ATTEMPTS: PartitionedTable = { table: "webhook_attempts", prefix: "dlv" };

/**
 * The smallest id a delivery of the event `eventId` can have: a delivery is made with its event or after it (a
 * replay), so its ULID time is never earlier, and a search for an event's deliveries reads only the months from
 * the event's on. The SQL form is {@link FIRST_DELIVERY_ID_SQL}.
 */
export const firstDeliveryIdOf = (eventId: string): string => `dlv_${eventId.slice(4, 14)}`;
/** {@link firstDeliveryIdOf} in SQL, of the column `e.id`. */
export const FIRST_DELIVERY_ID_SQL = "('dlv_' || substr(e.id, 5, 10))";

/** Months after the current one that always have their partitions (the housekeeping runs hourly). */
export const MONTHS_AHEAD = 2;

/**
 * A delivery is final within this long of its creation (its retry window, and a day for the last attempt),
 * so a month of deliveries that ended this long before the cut-off is all final before it.
 */
const FINAL_WITHIN_MS = retrySchedule.windowMs + ms.day;

/** Creates the partitions of this month and of the {@link MONTHS_AHEAD} after it that do not exist yet. */
export async function ensureWebhookPartitions(em: Em, now: Date): Promise<string[]> {
  const created: string[] = [];
  for (const t of [EVENTS, DELIVERIES, ATTEMPTS])
    created.push(...(await ensurePartitions(em, t, now, monthStart(now, MONTHS_AHEAD))));
  return created;
}

/** What {@link dropExpiredMonths} did. */
export interface DroppedMonths {
  /** Partitions dropped, every table's. */
  dropped: string[];
  /** Later deliveries (replays) of the dropped months' events, deleted row by row, and their attempts. */
  deleted: { webhook_deliveries: number; webhook_attempts: number };
}

const sameMonth = (list: Partition[], p: Partition) => list.find((q) => q.to.getTime() === p.to.getTime());

/**
 * Drops each month of events, deliveries and attempts that is wholly past retention (CONTRACT.md §11): every
 * event of it raised, and every delivery of it final, before `cutoff`. A month qualifies when it ended at
 * least a retry window before the cut-off (no delivery created in it can still be running or have ended since),
 * its newest event by the clock is that old too, none of its deliveries is PENDING or FAILED, and no later
 * delivery of its events (a replay) is still inside retention. Such later deliveries, all past retention, are
 * deleted row by row first, with their attempts. A month that does not qualify is left to the row-by-row purge
 * of the edges (webhook-retention.repository.ts). `em` must not be in a transaction: a partition is detached
 * concurrently.
 */
export async function dropExpiredMonths(em: Em, cutoff: Date): Promise<DroppedMonths> {
  const last = new Date(cutoff.getTime() - FINAL_WITHIN_MS);
  const out: DroppedMonths = { dropped: [], deleted: { webhook_deliveries: 0, webhook_attempts: 0 } };
  const [events, deliveries, attempts] = await Promise.all(
    [EVENTS, DELIVERIES, ATTEMPTS].map((t) => listPartitions(em, t)),
  );
  for (const month of events ?? []) {
    if (month.to > last) break;
    const ofDeliveries = sameMonth(deliveries ?? [], month);
    const ofAttempts = sameMonth(attempts ?? [], month);
    if (!ofDeliveries || !ofAttempts) continue;
    if (!(await qualifies(em, month, ofDeliveries, cutoff, last))) continue;
    const replays = await sql<{ id: string }>(
      em,
      `select id from webhook_deliveries where id >= $1 and event_id >= $2 and event_id < $3`,
      [
        monthKey(DELIVERIES, month.to),
        month.from ? monthKey(EVENTS, month.from) : "",
        monthKey(EVENTS, month.to),
      ],
    );
    if (replays.length > 0) {
      const ids = replays.map((r) => r.id);
      out.deleted.webhook_attempts += await deleteCounted(
        em,
        "delete from webhook_attempts where delivery_id = any($1::text[]) returning 1",
        [ids],
      );
      out.deleted.webhook_deliveries += await deleteCounted(
        em,
        "delete from webhook_deliveries where id = any($1::text[]) returning 1",
        [ids],
      );
    }
    await dropPartition(em, ATTEMPTS, ofAttempts);
    await dropPartition(em, DELIVERIES, ofDeliveries);
    await dropPartition(em, EVENTS, month);
    out.dropped.push(ofAttempts.name, ofDeliveries.name, month.name);
  }
  return out;
}

/** The checks of {@link dropExpiredMonths} that read the month's rows: each an index lookup, not a scan. */
async function qualifies(em: Em, month: Partition, deliveries: Partition, cutoff: Date, last: Date) {
  const [row] = await sql<{ newest_at: Date | null; running: boolean; replayed: boolean }>(
    em,
    `select (select max(created_at) from ${month.name}) as newest_at,
            exists (select 1 from ${deliveries.name} where status in ('PENDING', 'FAILED')) as running,
            exists (select 1 from webhook_deliveries
                     where id >= $1 and event_id >= $2 and event_id < $3
                       and (status in ('PENDING', 'FAILED') or coalesce(delivered_at, given_up_at, created_at) >= $4)) as replayed`,
    [
      monthKey(DELIVERIES, month.to),
      month.from ? monthKey(EVENTS, month.from) : "",
      monthKey(EVENTS, month.to),
      cutoff,
    ],
  );
  if (!row) return false;
  return (row.newest_at === null || row.newest_at < last) && !row.running && !row.replayed;
}
