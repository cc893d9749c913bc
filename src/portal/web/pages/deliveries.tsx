import { useInfiniteQuery, useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import {
  type Delivery,
  Delivery_StatusSchema,
  WebhookService,
} from "../../../../gen/partner/v1/webhooks_pb.ts";
import { ErrorBox, enumName, Loading, Page, Time } from "../ui.tsx";

/** One subscription and its deliveries, newest first, each with its last attempt and a Replay action. */
export function DeliveriesPage({ webhookId }: { webhookId: string }) {
  const webhook = useQuery(WebhookService.method.getWebhook, { id: webhookId });
  const deliveries = useInfiniteQuery(
    WebhookService.method.listDeliveries,
    { webhookId, limit: 50, startingAfter: "" },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.deliveries.at(-1)?.id : undefined),
    },
  );
  const rows = deliveries.data?.pages.flatMap((p) => p.deliveries) ?? [];
  return (
    <Page title={webhook.data?.webhook ? `Deliveries to ${webhook.data.webhook.url}` : "Deliveries"}>
      <ErrorBox error={webhook.error ?? deliveries.error} />
      {deliveries.isPending ? <Loading /> : null}
      {deliveries.data && rows.length === 0 ? (
        <p>No deliveries yet. Send a test from the Webhooks page.</p>
      ) : null}
      {rows.length > 0 ? (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Deliveries</caption>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last answer</th>
                <th scope="col">Next attempt</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((d) => (
                <DeliveryRow key={d.id} delivery={d} />
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {deliveries.hasNextPage ? (
        <button type="button" class="secondary" onClick={() => void deliveries.fetchNextPage()}>
          Load more
        </button>
      ) : null}
    </Page>
  );
}

function DeliveryRow({ delivery: d }: { delivery: Delivery }) {
  const client = useQueryClient();
  const replay = useMutation(WebhookService.method.replayDelivery);
  return (
    <tr>
      <td>
        <code>{d.eventType}</code>
        <br />
        <code class="muted">{d.eventId}</code>
      </td>
      <td>{enumName(Delivery_StatusSchema, d.status)}</td>
      <td>{d.attempt}</td>
      <td>
        {d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : d.lastError || "—"}
        {d.lastLatencyMs ? <span class="muted"> in {d.lastLatencyMs} ms</span> : null}
        {d.lastResponseBody ? (
          <details>
            <summary>Response body</summary>
            <pre>{d.lastResponseBody}</pre>
          </details>
        ) : null}
      </td>
      <td>
        <Time at={d.nextAttemptAt} />
      </td>
      <td>
        <button
          type="button"
          class="secondary"
          disabled={replay.isPending}
          onClick={() => replay.mutate({ id: d.id }, { onSuccess: () => void client.invalidateQueries() })}
        >
          Replay
        </button>
        <ErrorBox error={replay.error} />
      </td>
    </tr>
  );
}
