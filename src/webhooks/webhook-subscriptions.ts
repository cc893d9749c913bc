import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { DestinationPolicy } from "./destination.ts";
import { newWebhookSecret } from "./signature.ts";
import type { Webhook } from "./webhook.entity.ts";
import { webhookRepository as repo } from "./webhook.repository.ts";
import { checkDescription, checkFilters, checkUrl, MAX_FILTERS } from "./webhook-input.ts";
import { secretAad } from "./webhook-secrets.ts";

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

/** What creating and changing subscriptions needs. */
export interface SubscriptionDeps {
  clock: Clock;
  box: SecretBox;
  destinations: DestinationPolicy;
}

const MAX_WEBHOOKS = 50;
/** CONTRACT.md §5: after a rotation the old secret signs beside the new one for 24 hours. */
const PREVIOUS_SECRET_MS = 24 * ms.hour;

/** A live subscription of the caller, locked when asked; another tenant's id is simply not found. */
export async function loadWebhook(em: Em, id: string, lock = false): Promise<Webhook> {
  const hook = isId("whk", id) ? await repo.findWebhook(em, id, lock) : null;
  if (!hook) throw new ApiError("not_found", `No webhook ${id}.`);
  return hook;
}

/** A new ACTIVE subscription with a new secret, within the cap of subscriptions per environment. */
export async function createWebhook(
  deps: SubscriptionDeps,
  em: Em,
  input: WebhookInput,
): Promise<WebhookWithSecret> {
  if (input.events.length === 0)
    throw validationFailed({ events: "subscribe to at least one event type or filter" });
  if (input.events.length > MAX_FILTERS) throw validationFailed({ events: `at most ${MAX_FILTERS} filters` });
  const events = checkFilters(input.events, "events");
  const url = checkUrl(deps.destinations, em, input.url);
  const description = checkDescription(input.description);
  return inTransaction(em, async (tx) => {
    // Creates of one partner and environment take turns, so concurrent ones cannot pass the cap together.
    await repo.lockTenantWebhooks(tx);
    if ((await repo.countWebhooks(tx)) >= MAX_WEBHOOKS) {
      throw new ApiError("conflict", `At most ${MAX_WEBHOOKS} webhooks per environment; delete one first.`);
    }
    const id = newId("whk");
    const secret = newWebhookSecret();
    const now = deps.clock.now();
    const hook = await repo.insertWebhook(tx, {
      id,
      url,
      description,
      events,
      status: "ACTIVE",
      disabledReason: null,
      secretEnc: deps.box.seal(Buffer.from(secret), secretAad(id)),
      createdAt: now,
      updatedAt: now,
    });
    return Object.assign(hook, { secret });
  });
}

/** Changes a subscription's URL, filters or description; a new URL revives it and closes its circuit. */
export async function updateWebhook(
  deps: SubscriptionDeps,
  em: Em,
  id: string,
  patch: WebhookPatch,
): Promise<Webhook> {
  const add = checkFilters(patch.addEvents, "addEvents");
  const remove = checkFilters(patch.removeEvents, "removeEvents");
  const url = patch.url === undefined ? undefined : checkUrl(deps.destinations, em, patch.url);
  const description = patch.description === undefined ? undefined : checkDescription(patch.description);
  return inTransaction(em, async (tx) => {
    const current = await loadWebhook(tx, id, true);
    const events = [...new Set([...current.events.filter((e) => !remove.includes(e)), ...add])];
    if (events.length === 0) throw validationFailed({ removeEvents: "at least one filter must remain" });
    if (events.length > MAX_FILTERS) throw validationFailed({ addEvents: `at most ${MAX_FILTERS} filters` });
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
    current.updatedAt = deps.clock.now();
    await repo.save(tx);
    return current;
  });
}

/** Deletes at once: pending deliveries end GIVEN_UP and no attempt is started for them again. */
export async function deleteWebhook(deps: SubscriptionDeps, em: Em, id: string): Promise<number> {
  return inTransaction(em, async (tx) => {
    const hook = await loadWebhook(tx, id, true);
    const now = deps.clock.now();
    hook.deletedAt = now;
    hook.updatedAt = now;
    await repo.save(tx);
    return repo.giveUpDeliveries(tx, [id], now);
  });
}

/** A new secret; the one before keeps signing beside it for 24 hours. */
export async function rotateWebhookSecret(
  deps: SubscriptionDeps,
  em: Em,
  id: string,
): Promise<WebhookWithSecret> {
  return inTransaction(em, async (tx) => {
    const hook = await loadWebhook(tx, id, true);
    const secret = newWebhookSecret();
    const now = deps.clock.now();
    hook.previousSecretEnc = hook.secretEnc;
    hook.previousSecretExpiresAt = new Date(now.getTime() + PREVIOUS_SECRET_MS);
    hook.secretEnc = deps.box.seal(Buffer.from(secret), secretAad(id));
    hook.updatedAt = now;
    await repo.save(tx);
    return Object.assign(hook, { secret });
  });
}
