import type { Em } from "../platform/db/orm.ts";
import { deleteCounted } from "../platform/db/purge.ts";
import { sql } from "../platform/db/sql.ts";
import type { PurgeBatch, PurgeStep } from "../retention/retention.service.ts";
import { dropExpiredMonths, FIRST_DELIVERY_ID_SQL } from "./webhook-partition.repository.ts";

/**
 * The webhooks feature's retention (docs/operations.md "Retention"): what is deleted from its tables (webhooks,
 * events, webhook_deliveries, webhook_attempts) once past RETENTION_DAYS, one batch per call, in the caller's
 * transaction. Kept apart from `webhook.repository.ts` (the delivery path's statements); nothing else deletes
 * from these tables but the hourly pruning of attempts.
 *
 * A delivery is never purged while it is PENDING or FAILED, whatever its age: its retries run until 14 days
 * after it was created (a replay is a new delivery with its own 14 days), and RETENTION_DAYS is at least 15.
 */

/** Deletes the attempts of these deliveries, then the deliveries; returns how many of each. */
async function deleteDeliveries(tx: Em, ids: string[]): Promise<{ attempts: number; deliveries: number }> {
  if (ids.length === 0) return { attempts: 0, deliveries: 0 };
  const attempts = await deleteCounted(
    tx,
    "delete from webhook_attempts where delivery_id = any($1::text[]) returning 1",
    [ids],
  );
  const deliveries = await deleteCounted(
    tx,
    "delete from webhook_deliveries where id = any($1::text[]) returning 1",
    [ids],
  );
  return { attempts, deliveries };
}

/**
 * An event is done with once none of its deliveries is PENDING or FAILED and the last of them reached its
 * final state (DELIVERED or GIVEN_UP) before the cut-off; an event without deliveries (theirs were purged with
 * a deleted webhook), once it was raised before the cut-off.
 */
const EVENT_DONE = `
  e.created_at < $1
  and not exists (
    select 1 from webhook_deliveries d
     where d.event_id = e.id and d.id >= ${FIRST_DELIVERY_ID_SQL}
       and (d.status in ('PENDING', 'FAILED') or coalesce(d.delivered_at, d.given_up_at, d.created_at) >= $1))`;

/** Events past retention, with all their deliveries (replays included) and what is left of their attempts. */
export const eventsPurge: PurgeStep = {
  name: "events",
  retention: "default",
  // Whole months first (webhook-partition.repository.ts): a month's backlog is dropped, the batches take the edges.
  dropWhole: dropExpiredMonths,
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    // Oldest first through `events_by_age`; an event in use elsewhere (a replay being written holds a key
    // share on it) is skipped, not waited for.
    const picked = await sql<{ id: string }>(
      tx,
      `select e.id from events e where ${EVENT_DONE}
        order by e.created_at limit $2 for update of e skip locked`,
      [cutoff, limit],
    );
    if (picked.length === 0) return { picked: 0, deleted: {} };
    // Checked again on a fresh snapshot now that the rows are locked (no new delivery can reference a locked
    // event): a replay committed between the search and the lock keeps its event.
    const done = await sql<{ id: string }>(
      tx,
      `select e.id from events e where e.id = any($2::text[]) and ${EVENT_DONE}`,
      [cutoff, picked.map((r) => r.id)],
    );
    const ids = done.map((r) => r.id);
    if (ids.length === 0) return { picked: picked.length, deleted: {} };
    // Every delivery of these events goes in one statement, so a replay and the delivery it replays
    // (`replay_of`, always of the same event) go together.
    const deliveries = await sql<{ id: string }>(
      tx,
      "select id from webhook_deliveries where event_id = any($1::text[])",
      [ids],
    );
    const gone = await deleteDeliveries(
      tx,
      deliveries.map((d) => d.id),
    );
    const events = await deleteCounted(tx, "delete from events where id = any($1::text[]) returning 1", [
      ids,
    ]);
    return {
      picked: picked.length,
      deleted: {
        events,
        webhook_deliveries: gone.deliveries,
        webhook_attempts: gone.attempts,
      },
    };
  },
};

/**
 * The deliveries (and attempts) of webhooks deleted before the cut-off: deleting a webhook gave up its pending
 * deliveries at once, so they are all final. Replays first (a delivery another delivery replays waits for a
 * later batch), so `replay_of` never points at a deleted row.
 */
export const deletedWebhookDeliveriesPurge: PurgeStep = {
  name: "deleted webhooks' deliveries",
  retention: "default",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const picked = await sql<{ id: string }>(
      tx,
      `select d.id from webhook_deliveries d
        where d.webhook_id in (select w.id from webhooks w where w.deleted_at < $1)
          and not exists (select 1 from webhook_deliveries r where r.replay_of = d.id)
        limit $2 for update of d skip locked`,
      [cutoff, limit],
    );
    const gone = await deleteDeliveries(
      tx,
      picked.map((r) => r.id),
    );
    return {
      picked: picked.length,
      deleted: { webhook_deliveries: gone.deliveries, webhook_attempts: gone.attempts },
    };
  },
};

/** Webhooks deleted before the cut-off once nothing of theirs is left (the step before removes it). */
export const deletedWebhooksPurge: PurgeStep = {
  name: "deleted webhooks",
  retention: "default",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const deleted = await deleteCounted(
      tx,
      `delete from webhooks where id in (
         select w.id from webhooks w
          where w.deleted_at < $1
            and not exists (select 1 from webhook_deliveries d where d.webhook_id = w.id)
            and not exists (select 1 from webhook_attempts a where a.webhook_id = w.id)
          limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    return { picked: deleted, deleted: { webhooks: deleted } };
  },
};

/**
 * The webhooks feature's purges, in order: a deleted webhook's deliveries, then the webhook, then events
 * (an event whose deliveries all went with deleted webhooks goes in the same run).
 */
export const webhookPurges: PurgeStep[] = [deletedWebhookDeliveriesPurge, deletedWebhooksPurge, eventsPurge];
