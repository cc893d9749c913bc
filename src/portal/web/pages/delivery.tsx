import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useContext } from "preact/hooks";
import {
  type Delivery,
  Delivery_StatusSchema,
  type DeliveryAttempt,
  WebhookService,
} from "../../../../gen/partner/v1/webhooks_pb.ts";
import { CanWriteContext } from "../api.ts";
import { IdLink } from "../ids.tsx";
import { ErrorBox, enumName, Loading, Page, StatusBadge, Time } from "../ui.tsx";
import { lastAnswer } from "./events.tsx";

/** One delivery (`/deliveries/dlv_…`): where it went, each attempt and what the endpoint answered, and Replay. */
export function DeliveryPage({ id }: { id: string }) {
  const delivery = useQuery(WebhookService.method.getDelivery, { id });
  const attempts = useQuery(WebhookService.method.listDeliveryAttempts, { id });
  const d = delivery.data?.delivery;
  const crumbs = [
    { label: "Webhooks", path: "/webhooks" },
    ...(d ? [{ label: "Subscription", path: `/webhooks/${d.webhookId}` }] : []),
  ];
  return (
    <Page title="Delivery" id={id} crumbs={crumbs}>
      {delivery.isPending ? <Loading /> : null}
      <ErrorBox error={delivery.error ?? attempts.error} />
      {d ? (
        <>
          <DeliveryFacts d={d} />
          <h2>Attempts</h2>
          {attempts.data?.attempts.length === 0 ? (
            <p class="empty">No attempt yet: the first is made within seconds of the event.</p>
          ) : null}
          <ol class="timeline">
            {attempts.data?.attempts.map((a) => (
              <AttemptItem key={a.attempt} a={a} />
            ))}
          </ol>
        </>
      ) : null}
    </Page>
  );
}

function DeliveryFacts({ d }: { d: Delivery }) {
  const client = useQueryClient();
  const canWrite = useContext(CanWriteContext);
  const replay = useMutation(WebhookService.method.replayDelivery, {
    onSuccess: () => void client.invalidateQueries(),
  });
  return (
    <>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <StatusBadge status={enumName(Delivery_StatusSchema, d.status)} />
          {d.test ? " (test)" : ""}
        </dd>
        <dt>Event</dt>
        <dd>
          <IdLink id={d.eventId} /> <code>{d.eventType}</code>
        </dd>
        <dt>Webhook</dt>
        <dd>
          <IdLink id={d.webhookId} />
        </dd>
        <dt>Last answer</dt>
        <dd>{lastAnswer(d)}</dd>
        {d.nextAttemptAt ? (
          <>
            <dt>Next attempt</dt>
            <dd>
              <Time at={d.nextAttemptAt} relative />
            </dd>
          </>
        ) : null}
        {d.replayOf ? (
          <>
            <dt>Replay of</dt>
            <dd>
              <IdLink id={d.replayOf} />
            </dd>
          </>
        ) : null}
      </dl>
      {canWrite ? (
        <div class="actions">
          <button
            type="button"
            class="secondary"
            disabled={replay.isPending}
            onClick={() => replay.mutate({ id: d.id })}
          >
            Replay
          </button>
        </div>
      ) : null}
      {replay.data?.delivery ? (
        <p role="status">
          Replayed as <IdLink id={replay.data.delivery.id} />.
        </p>
      ) : null}
      <ErrorBox error={replay.error} />
    </>
  );
}

function AttemptItem({ a }: { a: DeliveryAttempt }) {
  return (
    <li class={a.succeeded ? "" : "bad"}>
      <p>
        <strong>Attempt {a.attempt}</strong>, <Time at={a.startedAt} />:{" "}
        {a.statusCode ? `HTTP ${a.statusCode}` : a.error} in {a.latencyMs} ms
        {a.succeeded ? " (delivered)" : ""}
      </p>
      {a.responseBody ? <pre>{a.responseBody}</pre> : null}
      <details>
        <summary>Headers sent</summary>
        <pre>
          {Object.entries(a.signatureHeaders)
            .map(([k, v]) => `${k}: ${v}`)
            .join("\n")}
        </pre>
      </details>
    </li>
  );
}
