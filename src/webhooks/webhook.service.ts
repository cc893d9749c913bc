import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Metrics } from "../platform/metrics.ts";
import { type Environment, tenantOf } from "../platform/tenancy.ts";
import { type BucketSpec, createWorkLimiter } from "../ratelimit/limiters.service.ts";
import { secretAad } from "./delivery.worker.ts";
import { deliveryLogRepository as log } from "./delivery-log.repository.ts";
import {
  DestinationError,
  type DestinationPolicy,
  localAllowed,
  parseDestination,
  portOf,
  vetHost,
} from "./destination.ts";
import {
  type EventType,
  eventTypes,
  isEventType,
  isValidFilter,
  samplePayloads,
  subscribed,
} from "./event-types.ts";
import type { Outbox } from "./outbox.ts";
import { newWebhookSecret } from "./signature.ts";
import type { Webhook } from "./webhook.entity.ts";
import { webhookRepository as repo } from "./webhook.repository.ts";

/** A subscription with the secret that was just made (create and rotate only). */
export type WebhookWithSecret = Webhook & { secret: string };

/** The fields CreateWebhook takes. */
export interface WebhookInput {
  url: string;
  events: string[];
  description: string;
}

/** The fields UpdateWebhook takes; absent fields stay as they are. */
export interface WebhookPatch {
  url?: string | undefined;
  addEvents: string[];
  removeEvents: string[];
  description?: string | undefined;
}

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

const MAX_WEBHOOKS = 50;
const MAX_FILTERS = 20;
const MAX_DESCRIPTION = 500;
/** CONTRACT.md §5: after a rotation the old secret signs beside the new one for 24 hours. */
const PREVIOUS_SECRET_MS = 24 * ms.hour;

/** Test sends and replays need a subscription that is not DISABLED (by a 410). */
function assertSendable(hook: Webhook): void {
  if (hook.status === "DISABLED") {
    throw new ApiError(
      "conflict",
      "This webhook is disabled (its endpoint answered 410); change its URL first.",
    );
  }
}

/** What ReplayFailedDeliveries queued. */
export interface ReplayedFailed {
  queued: number;
  hasMore: boolean;
}

/** CONTRACT.md §5, §11: replays reach back at most 14 days (the retry window, inside retention). */
const REPLAY_WINDOW_MS = 14 * ms.day;
/** The most replays one ReplayFailedDeliveries call queues, whatever the bucket holds. */
const MAX_REPLAYS_PER_CALL = 1000;

/** What {@link createWebhookService} returns. */
export type WebhookService = ReturnType<typeof createWebhookService>;

/** Webhook subscriptions: create, read, change, delete, rotate, test and replay (CONTRACT.md §5). */
export function createWebhookService({
  clock,
  box,
  outbox,
  destinations,
  sendLimit,
  metrics,
}: WebhookServiceOptions) {
  const sends = createWorkLimiter("webhook-sends", sendLimit);
  /**
   * Takes a token from the partner's test-send and replay bucket (per environment), or refuses with 429
   * `webhook_sends_rate_limited` and `Retry-After`. It runs on the request's unit of work (inside its
   * transaction: a request that fails later gives its token back).
   */
  const takeSendToken = async (tx: Em, want = 1): Promise<void> => {
    const decision = await sends.take(tx, tenantOf(tx), want);
    if (decision.allowed) return;
    metrics?.expensiveLimitRejections.inc({ limit: "webhook_sends" });
    throw new ApiError("webhook_sends_rate_limited", undefined, {
      retryAfterSeconds: decision.retryAfterSeconds,
      details: { capacity: sendLimit.capacity, refillPerSecond: sendLimit.refillPerSecond },
    });
  };

  const checkFilters = (filters: string[], field: string): string[] => {
    const bad = filters.filter((f) => !isValidFilter(f));
    if (bad.length > 0) {
      throw new ApiError(
        "invalid_event_type",
        `Unknown event type or filter: ${bad.map((b) => JSON.stringify(b)).join(", ")}. Use one of ${eventTypes.join(", ")}, "*", or a prefix wildcard such as "consent.*".`,
        { details: { field, invalid: bad, eventTypes: [...eventTypes] } },
      );
    }
    return [...new Set(filters)];
  };

  /** A refused destination as the contract's 422, naming the field. */
  const asFieldError = (err: unknown): never => {
    if (err instanceof DestinationError) throw validationFailed({ url: err.message });
    throw err;
  };

  /**
   * The form of a destination for a subscription of `em`'s environment (https; http only for sandbox, and only
   * with ALLOW_LOCAL_WEBHOOKS). Its address is checked by {@link checkDestination} before the transaction
   * opens, and again at every attempt.
   */
  const checkUrl = (em: Em, raw: string): string => {
    try {
      return parseDestination(raw.trim(), localAllowed(destinations, tenantOf(em).environment)).toString();
    } catch (err) {
      return asFieldError(err);
    }
  };

  const checkDescription = (d: string): string => {
    if (d.length > MAX_DESCRIPTION)
      throw validationFailed({ description: `must be at most ${MAX_DESCRIPTION} characters` });
    return d;
  };

  /** A live subscription of the caller, locked when asked; another tenant's id is simply not found. */
  const load = async (em: Em, id: string, lock = false): Promise<Webhook> => {
    const hook = isId("whk", id) ? await repo.findWebhook(em, id, lock) : null;
    if (!hook) throw new ApiError("not_found", `No webhook ${id}.`);
    return hook;
  };

  return {
    /**
     * Resolves a destination's host (within WEBHOOK_DNS_TIMEOUT_MS) and checks every address it has: public
     * only (loopback for sandbox with ALLOW_LOCAL_WEBHOOKS), never this service's own listeners. A network
     * wait, so it runs before any transaction: the edge's precheck of create and update (webhook.prechecks.ts).
     * Refusals are `422 validation_failed` naming `url`: "does not resolve", "did not resolve in time", "is
     * not a public address".
     */
    async checkDestination(environment: Environment, raw: string): Promise<void> {
      try {
        const url = parseDestination(raw.trim(), localAllowed(destinations, environment));
        await vetHost(url.hostname, destinations, portOf(url), environment);
      } catch (err) {
        asFieldError(err);
      }
    },

    async create(em: Em, input: WebhookInput): Promise<WebhookWithSecret> {
      if (input.events.length === 0)
        throw validationFailed({ events: "subscribe to at least one event type or filter" });
      if (input.events.length > MAX_FILTERS)
        throw validationFailed({ events: `at most ${MAX_FILTERS} filters` });
      const events = checkFilters(input.events, "events");
      const url = checkUrl(em, input.url);
      const description = checkDescription(input.description);
      return inTransaction(em, async (tx) => {
        // Creates of one partner and environment take turns, so concurrent ones cannot pass the cap together.
        await repo.lockTenantWebhooks(tx);
        if ((await repo.countWebhooks(tx)) >= MAX_WEBHOOKS) {
          throw new ApiError(
            "conflict",
            `At most ${MAX_WEBHOOKS} webhooks per environment; delete one first.`,
          );
        }
        const id = newId("whk");
        const secret = newWebhookSecret();
        const now = clock.now();
        const hook = await repo.insertWebhook(tx, {
          id,
          url,
          description,
          events,
          status: "ACTIVE",
          disabledReason: null,
          secretEnc: box.seal(Buffer.from(secret), secretAad(id)),
          createdAt: now,
          updatedAt: now,
        });
        return Object.assign(hook, { secret });
      });
    },

    async list(em: Em): Promise<Webhook[]> {
      return repo.listWebhooks(em);
    },

    async get(em: Em, id: string): Promise<Webhook> {
      return load(em, id);
    },

    async update(em: Em, id: string, patch: WebhookPatch): Promise<Webhook> {
      const add = checkFilters(patch.addEvents, "addEvents");
      const remove = checkFilters(patch.removeEvents, "removeEvents");
      const url = patch.url === undefined ? undefined : checkUrl(em, patch.url);
      const description = patch.description === undefined ? undefined : checkDescription(patch.description);
      return inTransaction(em, async (tx) => {
        const current = await load(tx, id, true);
        const events = [...new Set([...current.events.filter((e) => !remove.includes(e)), ...add])];
        if (events.length === 0) throw validationFailed({ removeEvents: "at least one filter must remain" });
        if (events.length > MAX_FILTERS)
          throw validationFailed({ addEvents: `at most ${MAX_FILTERS} filters` });
        // A new URL is a fresh start for a subscription disabled by a 410.
        if (url !== undefined && url !== current.url) {
          current.status = "ACTIVE";
          current.disabledReason = null;
          // A new endpoint starts with a closed circuit: the old one's failures say nothing about it.
          current.failureStreak = 0;
          current.circuitOpenedAt = null;
          current.circuitOpenUntil = null;
        }
        if (url !== undefined) current.url = url;
        if (description !== undefined) current.description = description;
        current.events = events;
        current.updatedAt = clock.now();
        await repo.save(tx);
        return current;
      });
    },

    /** Deletes at once: pending deliveries end GIVEN_UP and no attempt is started for them again. */
    async delete(em: Em, id: string): Promise<number> {
      return inTransaction(em, async (tx) => {
        const hook = await load(tx, id, true);
        const now = clock.now();
        hook.deletedAt = now;
        hook.updatedAt = now;
        await repo.save(tx);
        return repo.giveUpDeliveries(tx, [id], now);
      });
    },

    async rotateSecret(em: Em, id: string): Promise<WebhookWithSecret> {
      return inTransaction(em, async (tx) => {
        const hook = await load(tx, id, true);
        const secret = newWebhookSecret();
        const now = clock.now();
        hook.previousSecretEnc = hook.secretEnc;
        hook.previousSecretExpiresAt = new Date(now.getTime() + PREVIOUS_SECRET_MS);
        hook.secretEnc = box.seal(Buffer.from(secret), secretAad(id));
        hook.updatedAt = now;
        await repo.save(tx);
        return Object.assign(hook, { secret });
      });
    },

    /** A synthetic event (`test: true`) for this subscription only, through the normal queue and signing. */
    async sendTest(em: Em, id: string, eventType: string): Promise<string> {
      if (eventType !== "" && !isEventType(eventType)) {
        throw new ApiError("invalid_event_type", `Unknown event type ${JSON.stringify(eventType)}.`, {
          details: { eventTypes: [...eventTypes] },
        });
      }
      return inTransaction(em, async (tx) => {
        const hook = await load(tx, id);
        assertSendable(hook);
        await takeSendToken(tx);
        const type: EventType =
          (eventType as EventType) || (eventTypes.find((t) => subscribed(hook.events, t)) as EventType);
        const raised = await outbox.raise(tx, {
          ...tenantOf(tx),
          type,
          payload: samplePayloads[type],
          test: true,
          onlyWebhookId: id,
        });
        return raised.deliveryIds[0] as string;
      });
    },

    /** A new delivery of an earlier delivery's event body, to the same subscription. */
    async replay(em: Em, deliveryId: string): Promise<string> {
      return inTransaction(em, async (tx) => {
        const original = isId("dlv", deliveryId) ? await repo.findDelivery(tx, deliveryId) : null;
        if (!original) throw new ApiError("not_found", `No delivery ${deliveryId}.`);
        const hook = await load(tx, original.webhookId).catch(() => {
          throw new ApiError("conflict", "The webhook of this delivery has been deleted.");
        });
        assertSendable(hook);
        await takeSendToken(tx);
        const id = newId("dlv");
        await repo.insertReplay(tx, id, original, clock.now());
        await outbox.enqueue(tx, [{ id, environment: original.environment }]);
        return id;
      });
    },

    /**
     * Replays the subscription's FAILED and GIVEN_UP deliveries created since `since` that were not replayed
     * yet, oldest first: as many as the send bucket holds when full (and at most 1000), all or none, one token
     * each (docs/webhooks.md "Replay every failed delivery").
     */
    async replayFailed(em: Em, webhookId: string, since: Date): Promise<ReplayedFailed> {
      const now = clock.now();
      if (Number.isNaN(since.getTime()) || since.getTime() > now.getTime())
        throw validationFailed({ since: "must not be in the future" });
      if (since.getTime() < now.getTime() - REPLAY_WINDOW_MS)
        throw validationFailed({ since: "must be within the last 14 days" });
      const batch = Math.max(1, Math.min(MAX_REPLAYS_PER_CALL, Math.floor(sendLimit.capacity)));
      return inTransaction(em, async (tx) => {
        const hook = await load(tx, webhookId);
        assertSendable(hook);
        const found = await log.replayable(tx, webhookId, since, batch);
        const originals = found.slice(0, batch);
        if (originals.length === 0) return { queued: 0, hasMore: false };
        await takeSendToken(tx, originals.length);
        const rows = originals.map((original) => ({ id: newId("dlv"), original }));
        await log.insertReplays(tx, webhookId, rows, now);
        await outbox.enqueue(
          tx,
          rows.map((r) => ({ id: r.id, environment: hook.environment })),
        );
        return { queued: rows.length, hasMore: found.length > batch };
      });
    },
  };
}
