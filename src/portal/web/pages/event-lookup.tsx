import { useQuery } from "@connectrpc/connect-query";
import { skipToken } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import { Delivery_StatusSchema, WebhookService } from "../../../../gen/partner/v1/webhooks_pb.ts";
import { ErrorBox, enumName, IdLookup, Loading, Page, Time } from "../ui.tsx";

/**
 * Looks up one event delivered to this partner's webhooks by its `evt_` id (or shows the one in the address,
 * `/events/evt_…`): its body and deliveries.
 */
export function EventLookupPage({ initial = "" }: { initial?: string }) {
  const [id, setId] = useState(initial);
  const event = useQuery(WebhookService.method.getEvent, id ? { id } : skipToken);
  return (
    <Page title="Event lookup">
      <IdLookup label="Event id" prefix="evt" onId={setId} />
      {id && event.isPending ? <Loading /> : null}
      <ErrorBox error={event.error} />
      {event.data?.event ? (
        <article>
          <h2>
            <code>{event.data.event.type}</code> <Time at={event.data.event.createdAt} />
          </h2>
          <pre>{JSON.stringify(event.data.event.payload, null, 2)}</pre>
          <h3>Deliveries</h3>
          <ul>
            {event.data.event.deliveries.map((d) => (
              <li key={d.id}>
                <code>{d.id}</code> to <code>{d.webhookId}</code>: {enumName(Delivery_StatusSchema, d.status)}{" "}
                after {d.attempt} attempt(s)
              </li>
            ))}
          </ul>
        </article>
      ) : null}
    </Page>
  );
}
