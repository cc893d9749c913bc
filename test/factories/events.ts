import type { App } from "../../src/app.ts";
import type { Environment } from "../../src/platform/tenancy.ts";
import type { EventType } from "../../src/webhooks/event-types.ts";
import type { RaisedEvent } from "../../src/webhooks/outbox.service.ts";

/** Raises an event through the outbox, in its own transaction, as a feature would with its change. */
export function raiseEvent(
  app: App,
  input: { partnerId: string; environment: Environment; type: EventType; payload?: Record<string, unknown> },
): Promise<RaisedEvent> {
  return app.orm.em
    .fork()
    .transactional((tx) =>
      app.services.outbox.raise(tx, { payload: { note: "raised by a test" }, ...input }),
    );
}

/** A webhook subscription made over REST; returns its id and secret. */
export async function createWebhook(
  partnerUrl: string,
  key: string,
  body: { url: string; events: string[]; description?: string },
): Promise<{ id: string; secret: string }> {
  const res = await fetch(`${partnerUrl}/partner/v1/webhooks`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { id: string; secret: string };
  if (res.status !== 200) throw new Error(`create webhook: ${res.status} ${JSON.stringify(json)}`);
  return json;
}
