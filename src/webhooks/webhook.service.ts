import type { BucketSpec } from "../config.ts";
import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import type { Metrics } from "../platform/metrics.ts";
import { type Environment, tenantOf } from "../platform/tenancy.ts";
import { createWorkLimiter } from "../ratelimit/work-limiter.ts";
import type { DestinationPolicy } from "./destination.ts";
import type { Outbox } from "./outbox.service.ts";
import type { Webhook } from "./webhook.entity.ts";
import { webhookRepository as repo } from "./webhook.repository.ts";
import { checkDestination } from "./webhook-input.ts";
import { type ReplayedFailed, replay, replayFailed, type SendDeps, sendTest } from "./webhook-sends.ts";
import {
  createWebhook,
  deleteWebhook,
  loadWebhook,
  rotateWebhookSecret,
  type SubscriptionDeps,
  updateWebhook,
  type WebhookInput,
  type WebhookPatch,
  type WebhookWithSecret,
} from "./webhook-subscriptions.ts";

export type { ReplayedFailed, WebhookInput, WebhookPatch, WebhookWithSecret };

/** Options for {@link createWebhookService}. */
export interface WebhookServiceOptions {
  clock: Clock;
  box: SecretBox;
  outbox: Outbox;
  destinations: DestinationPolicy;
  /** Test sends and replays per partner and environment (their own bucket; docs/rate-limits.md). */
  sendLimit: BucketSpec;
  metrics?: Pick<Metrics, "expensiveLimitRejections">;
}

/** What {@link createWebhookService} returns. */
export type WebhookService = ReturnType<typeof createWebhookService>;

/**
 * Webhook subscriptions: create, read, change, delete, rotate (webhook-subscriptions.ts), test and replay
 * (webhook-sends.ts) (CONTRACT.md §5).
 */
export function createWebhookService(o: WebhookServiceOptions) {
  const subscriptions: SubscriptionDeps = { clock: o.clock, box: o.box, destinations: o.destinations };
  const sends: SendDeps = {
    clock: o.clock,
    outbox: o.outbox,
    takeSendToken: sendTokens(o),
    sendCapacity: o.sendLimit.capacity,
  };
  return {
    /**
     * Resolves a destination's host (within WEBHOOK_DNS_TIMEOUT_MS) and checks every address it has: public
     * only (loopback for sandbox with ALLOW_LOCAL_WEBHOOKS), never this service's own listeners. A network
     * wait, so it runs before any transaction: the edge's precheck of create and update (webhook.prechecks.ts).
     * Refusals are `422 validation_failed` naming `url`: "does not resolve", "did not resolve in time", "is
     * not a public address".
     */
    checkDestination: (environment: Environment, raw: string): Promise<void> =>
      checkDestination(o.destinations, environment, raw),
    create: (em: Em, input: WebhookInput): Promise<WebhookWithSecret> =>
      createWebhook(subscriptions, em, input),
    list: (em: Em): Promise<Webhook[]> => repo.listWebhooks(em),
    get: (em: Em, id: string): Promise<Webhook> => loadWebhook(em, id),
    update: (em: Em, id: string, patch: WebhookPatch): Promise<Webhook> =>
      updateWebhook(subscriptions, em, id, patch),
    /** Deletes at once: pending deliveries end GIVEN_UP and no attempt is started for them again. */
    delete: (em: Em, id: string): Promise<number> => deleteWebhook(subscriptions, em, id),
    rotateSecret: (em: Em, id: string): Promise<WebhookWithSecret> =>
      rotateWebhookSecret(subscriptions, em, id),
    /** A synthetic event (`test: true`) for this subscription only, through the normal queue and signing. */
    sendTest: (em: Em, id: string, eventType: string): Promise<string> => sendTest(sends, em, id, eventType),
    /** A new delivery of an earlier delivery's event body, to the same subscription. */
    replay: (em: Em, deliveryId: string): Promise<string> => replay(sends, em, deliveryId),
    /**
     * Replays the subscription's FAILED and GIVEN_UP deliveries created since `since` that were not replayed
     * yet, oldest first: as many as the send bucket holds when full (and at most 1000), all or none, one token
     * each (docs/webhooks.md "Replay every failed delivery").
     */
    replayFailed: (em: Em, webhookId: string, since: Date): Promise<ReplayedFailed> =>
      replayFailed(sends, em, webhookId, since),
  };
}

/**
 * Takes tokens from the partner's test-send and replay bucket (per environment), or refuses with 429
 * `webhook_sends_rate_limited` and `Retry-After`. It runs on the request's unit of work (inside its
 * transaction: a request that fails later gives its tokens back).
 */
function sendTokens({ sendLimit, metrics }: WebhookServiceOptions): SendDeps["takeSendToken"] {
  const sends = createWorkLimiter("webhook-sends", sendLimit);
  return async (tx, want = 1) => {
    const decision = await sends.take(tx, tenantOf(tx), want);
    if (decision.allowed) return;
    metrics?.expensiveLimitRejections.inc({ limit: "webhook_sends" });
    throw new ApiError("webhook_sends_rate_limited", undefined, {
      retryAfterSeconds: decision.retryAfterSeconds,
      details: { capacity: sendLimit.capacity, refillPerSecond: sendLimit.refillPerSecond },
    });
  };
}
