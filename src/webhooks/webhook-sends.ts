import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import { tenantOf } from "../platform/tenancy.ts";
import { deliveryLogRepository as log } from "./delivery-log.repository.ts";
import { type EventType, eventTypes, isEventType, samplePayloads, subscribed } from "./event-types.ts";
import type { Outbox } from "./outbox.service.ts";
import type { Webhook } from "./webhook.entity.ts";
import { webhookRepository as repo } from "./webhook.repository.ts";
import { loadWebhook } from "./webhook-subscriptions.ts";

/** What ReplayFailedDeliveries queued. */
export interface ReplayedFailed {
  queued: number;
  hasMore: boolean;
}

/** What test sends and replays need. */
export interface SendDeps {
  clock: Clock;
  outbox: Outbox;
  /**
   * Takes `want` tokens (1 by default) from the partner's test-send and replay bucket, or refuses with 429;
   * on the request's unit of work, so a request that fails later gives them back.
   */
  takeSendToken: (tx: Em, want?: number) => Promise<void>;
  /** What the send bucket holds when full. */
  sendCapacity: number;
}

/** CONTRACT.md §5, §11: replays reach back at most 14 days (the retry window, inside retention). */
const REPLAY_WINDOW_MS = 14 * ms.day;
/** The most replays one ReplayFailedDeliveries call queues, whatever the bucket holds. */
const MAX_REPLAYS_PER_CALL = 1000;

/** Test sends and replays need a subscription that is not DISABLED (by a 410). */
function assertSendable(hook: Webhook): void {
  if (hook.status === "DISABLED") {
    throw new ApiError(
      "conflict",
      "This webhook is disabled (its endpoint answered 410); change its URL first.",
    );
  }
}

/** A synthetic event (`test: true`) for this subscription only, through the normal queue and signing. */
export async function sendTest(deps: SendDeps, em: Em, id: string, eventType: string): Promise<string> {
  if (eventType !== "" && !isEventType(eventType)) {
    throw new ApiError("invalid_event_type", `Unknown event type ${JSON.stringify(eventType)}.`, {
      details: { eventTypes: [...eventTypes] },
    });
  }
  return inTransaction(em, async (tx) => {
    const hook = await loadWebhook(tx, id);
    assertSendable(hook);
    await deps.takeSendToken(tx);
    const type: EventType =
      (eventType as EventType) || (eventTypes.find((t) => subscribed(hook.events, t)) as EventType);
    const raised = await deps.outbox.raise(tx, {
      ...tenantOf(tx),
      type,
      payload: samplePayloads[type],
      test: true,
      onlyWebhookId: id,
    });
    return raised.deliveryIds[0] as string;
  });
}

/** A new delivery of an earlier delivery's event body, to the same subscription. */
export async function replay(deps: SendDeps, em: Em, deliveryId: string): Promise<string> {
  return inTransaction(em, async (tx) => {
    const original = isId("dlv", deliveryId) ? await repo.findDelivery(tx, deliveryId) : null;
    if (!original) throw new ApiError("not_found", `No delivery ${deliveryId}.`);
    const hook = await loadWebhook(tx, original.webhookId).catch(() => {
      throw new ApiError("conflict", "The webhook of this delivery has been deleted.");
    });
    assertSendable(hook);
    await deps.takeSendToken(tx);
    const id = newId("dlv");
    await repo.insertReplay(tx, id, original, deps.clock.now());
    await deps.outbox.enqueue(tx, [{ id, environment: original.environment }]);
    return id;
  });
}

/**
 * Replays the subscription's FAILED and GIVEN_UP deliveries created since `since` that were not replayed yet,
 * oldest first: as many as the send bucket holds when full (and at most 1000), all or none, one token each
 * (docs/webhooks.md "Replay every failed delivery").
 */
export async function replayFailed(
  deps: SendDeps,
  em: Em,
  webhookId: string,
  since: Date,
): Promise<ReplayedFailed> {
  const now = deps.clock.now();
  if (Number.isNaN(since.getTime()) || since.getTime() > now.getTime())
    throw validationFailed({ since: "must not be in the future" });
  if (since.getTime() < now.getTime() - REPLAY_WINDOW_MS)
    throw validationFailed({ since: "must be within the last 14 days" });
  const batch = Math.max(1, Math.min(MAX_REPLAYS_PER_CALL, Math.floor(deps.sendCapacity)));
  return inTransaction(em, async (tx) => {
    const hook = await loadWebhook(tx, webhookId);
    assertSendable(hook);
    const found = await log.replayable(tx, webhookId, since, batch);
    const originals = found.slice(0, batch);
    if (originals.length === 0) return { queued: 0, hasMore: false };
    await deps.takeSendToken(tx, originals.length);
    const rows = originals.map((original) => ({ id: newId("dlv"), original }));
    await log.insertReplays(tx, webhookId, rows, now);
    await deps.outbox.enqueue(
      tx,
      rows.map((r) => ({ id: r.id, environment: hook.environment })),
    );
    return { queued: rows.length, hasMore: found.length > batch };
  });
}
