import type { Caller } from "../apikeys/api-key.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction, sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import { secretAad } from "./delivery.worker.ts";
import { DestinationError, type DestinationPolicy, parseDestination, vetHost } from "./destination.ts";
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

/** A subscription as stored, without its secrets. */
export interface WebhookRow {
  id: string;
  url: string;
  events: string[];
  description: string;
  status: "ACTIVE" | "DISABLED";
  disabled_reason: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A subscription with the secret that was just made (create and rotate only). */
export interface WebhookWithSecret extends WebhookRow {
  secret: string;
}

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
}

const MAX_WEBHOOKS = 50;
const MAX_FILTERS = 20;
const MAX_DESCRIPTION = 500;
/** CONTRACT.md §5: after a rotation the old secret signs beside the new one for 24 hours. */
const PREVIOUS_SECRET_MS = 24 * ms.hour;
const COLUMNS =
  "id, url, events, description, status, disabled_reason, previous_secret_expires_at, created_at, updated_at";

/** Test sends and replays need a subscription that is not DISABLED (by a 410). */
function assertSendable(hook: WebhookRow): void {
  if (hook.status === "DISABLED") {
    throw new ApiError(
      "conflict",
      "This webhook is disabled (its endpoint answered 410); change its URL first.",
    );
  }
}

/** What {@link createWebhookService} returns. */
export type WebhookService = ReturnType<typeof createWebhookService>;

/** Webhook subscriptions: create, read, change, delete, rotate, test and replay (CONTRACT.md §5). */
export function createWebhookService({ clock, box, outbox, destinations }: WebhookServiceOptions) {
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

  const checkUrl = async (raw: string): Promise<string> => {
    try {
      const url = parseDestination(raw.trim(), destinations.allowLocal);
      await vetHost(url.hostname, destinations);
      return url.toString();
    } catch (err) {
      if (err instanceof DestinationError) throw validationFailed({ url: err.message });
      throw err;
    }
  };

  const checkDescription = (d: string): string => {
    if (d.length > MAX_DESCRIPTION)
      throw validationFailed({ description: `must be at most ${MAX_DESCRIPTION} characters` });
    return d;
  };

  /** A live subscription of the caller, locked when asked; another tenant's id is simply not found. */
  const load = async (em: Em, caller: Caller, id: string, lock = false): Promise<WebhookRow> => {
    const rows = isId("whk", id)
      ? await sql<WebhookRow>(
          em,
          `select ${COLUMNS} from webhooks
            where id = $1 and partner_id = $2 and environment = $3 and deleted_at is null ${lock ? "for update" : ""}`,
          [id, caller.partnerId, caller.environment],
        )
      : [];
    if (!rows[0]) throw new ApiError("not_found", `No webhook ${id}.`);
    return rows[0];
  };

  return {
    async create(em: Em, caller: Caller, input: WebhookInput): Promise<WebhookWithSecret> {
      if (input.events.length === 0)
        throw validationFailed({ events: "subscribe to at least one event type or filter" });
      if (input.events.length > MAX_FILTERS)
        throw validationFailed({ events: `at most ${MAX_FILTERS} filters` });
      const events = checkFilters(input.events, "events");
      const url = await checkUrl(input.url);
      const description = checkDescription(input.description);
      return inTransaction(em, async (tx) => {
        const [{ count } = { count: 0 }] = await sql<{ count: number }>(
          tx,
          "select count(*)::int as count from webhooks where partner_id = $1 and environment = $2 and deleted_at is null",
          [caller.partnerId, caller.environment],
        );
        if (count >= MAX_WEBHOOKS) {
          throw new ApiError(
            "conflict",
            `At most ${MAX_WEBHOOKS} webhooks per environment; delete one first.`,
          );
        }
        const id = newId("whk");
        const secret = newWebhookSecret();
        const now = clock.now();
        const [row] = await sql<WebhookRow>(
          tx,
          `insert into webhooks (id, partner_id, environment, url, description, events, status, secret_enc, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, 'ACTIVE', $7, $8, $8) returning ${COLUMNS}`,
          [
            id,
            caller.partnerId,
            caller.environment,
            url,
            description,
            events,
            box.seal(Buffer.from(secret), secretAad(id)),
            now,
          ],
        );
        return { ...(row as WebhookRow), secret };
      });
    },

    async list(em: Em, caller: Caller): Promise<WebhookRow[]> {
      return sql<WebhookRow>(
        em,
        `select ${COLUMNS} from webhooks where partner_id = $1 and environment = $2 and deleted_at is null
          order by created_at, id`,
        [caller.partnerId, caller.environment],
      );
    },

    async get(em: Em, caller: Caller, id: string): Promise<WebhookRow> {
      return load(em, caller, id);
    },

    async update(em: Em, caller: Caller, id: string, patch: WebhookPatch): Promise<WebhookRow> {
      const add = checkFilters(patch.addEvents, "addEvents");
      const remove = checkFilters(patch.removeEvents, "removeEvents");
      const url = patch.url === undefined ? undefined : await checkUrl(patch.url);
      const description = patch.description === undefined ? undefined : checkDescription(patch.description);
      return inTransaction(em, async (tx) => {
        const current = await load(tx, caller, id, true);
        const events = [...new Set([...current.events.filter((e) => !remove.includes(e)), ...add])];
        if (events.length === 0) throw validationFailed({ removeEvents: "at least one filter must remain" });
        if (events.length > MAX_FILTERS)
          throw validationFailed({ addEvents: `at most ${MAX_FILTERS} filters` });
        // A new URL is a fresh start for a subscription disabled by a 410.
        const reactivate = url !== undefined && url !== current.url;
        const [row] = await sql<WebhookRow>(
          tx,
          `update webhooks
              set url = coalesce($2, url), description = coalesce($3, description), events = $4, updated_at = $5,
                  status = case when $6 then 'ACTIVE' else status end,
                  disabled_reason = case when $6 then null else disabled_reason end
            where id = $1 returning ${COLUMNS}`,
          [id, url ?? null, description ?? null, events, clock.now(), reactivate],
        );
        return row as WebhookRow;
      });
    },

    /** Deletes at once: pending deliveries end GIVEN_UP and no attempt is started for them again. */
    async delete(em: Em, caller: Caller, id: string): Promise<number> {
      return inTransaction(em, async (tx) => {
        await load(tx, caller, id, true);
        const now = clock.now();
        await sql(tx, "update webhooks set deleted_at = $2, updated_at = $2 where id = $1", [id, now]);
        const given = await sql(
          tx,
          `update webhook_deliveries set status = 'GIVEN_UP', given_up_at = $2, next_attempt_at = null, locked_until = null
            where webhook_id = $1 and status in ('PENDING', 'FAILED') returning id`,
          [id, now],
        );
        return given.length;
      });
    },

    async rotateSecret(em: Em, caller: Caller, id: string): Promise<WebhookWithSecret> {
      return inTransaction(em, async (tx) => {
        await load(tx, caller, id, true);
        const secret = newWebhookSecret();
        const now = clock.now();
        const [row] = await sql<WebhookRow>(
          tx,
          `update webhooks
              set previous_secret_enc = secret_enc, previous_secret_expires_at = $3, secret_enc = $2, updated_at = $4
            where id = $1 returning ${COLUMNS}`,
          [
            id,
            box.seal(Buffer.from(secret), secretAad(id)),
            new Date(now.getTime() + PREVIOUS_SECRET_MS),
            now,
          ],
        );
        return { ...(row as WebhookRow), secret };
      });
    },

    /** A synthetic event (`test: true`) for this subscription only, through the normal queue and signing. */
    async sendTest(em: Em, caller: Caller, id: string, eventType: string): Promise<string> {
      if (eventType !== "" && !isEventType(eventType)) {
        throw new ApiError("invalid_event_type", `Unknown event type ${JSON.stringify(eventType)}.`, {
          details: { eventTypes: [...eventTypes] },
        });
      }
      return inTransaction(em, async (tx) => {
        const hook = await load(tx, caller, id);
        assertSendable(hook);
        const type: EventType =
          (eventType as EventType) || (eventTypes.find((t) => subscribed(hook.events, t)) as EventType);
        const raised = await outbox.raise(tx, {
          partnerId: caller.partnerId,
          environment: caller.environment,
          type,
          payload: samplePayloads[type],
          test: true,
          onlyWebhookId: id,
        });
        return raised.deliveryIds[0] as string;
      });
    },

    /** A new delivery of an earlier delivery's event body, to the same subscription. */
    async replay(em: Em, caller: Caller, deliveryId: string): Promise<string> {
      return inTransaction(em, async (tx) => {
        const [original] = isId("dlv", deliveryId)
          ? await sql<{ event_id: string; webhook_id: string }>(
              tx,
              `select event_id, webhook_id from webhook_deliveries
                where id = $1 and partner_id = $2 and environment = $3`,
              [deliveryId, caller.partnerId, caller.environment],
            )
          : [];
        if (!original) throw new ApiError("not_found", `No delivery ${deliveryId}.`);
        const hook = await load(tx, caller, original.webhook_id).catch(() => {
          throw new ApiError("conflict", "The webhook of this delivery has been deleted.");
        });
        assertSendable(hook);
        const id = newId("dlv");
        const now = clock.now();
        await sql(
          tx,
          `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, next_attempt_at, created_at, replay_of)
           values ($1, $2, $3, $4, $5, 'PENDING', $6, $6, $7)`,
          [id, original.event_id, original.webhook_id, caller.partnerId, caller.environment, now, deliveryId],
        );
        await outbox.enqueue(tx, [{ id }]);
        return id;
      });
    },
  };
}
