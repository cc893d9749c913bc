import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { useInfiniteQuery, useMutation, useQuery } from "@connectrpc/connect-query";
import { skipToken, useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import {
  type Delivery,
  Delivery_Status,
  Delivery_StatusSchema,
  WebhookService,
} from "../../../../gen/partner/v1/webhooks_pb.ts";
import { CheckboxSet, ErrorBox, enumName, Loading, LoadMore, Page, Time } from "../ui.tsx";
import { WebhookStats } from "./webhook-stats.tsx";

const STATUSES = [
  Delivery_Status.PENDING,
  Delivery_Status.FAILED,
  Delivery_Status.DELIVERED,
  Delivery_Status.GIVEN_UP,
];

/**
 * One subscription: its last 24 hours, its deliveries (newest first, filtered by status), each with its
 * attempts and a Replay action, and "replay every failed delivery since …".
 */
export function DeliveriesPage({ webhookId }: { webhookId: string }) {
  const webhook = useQuery(WebhookService.method.getWebhook, { id: webhookId });
  const [status, setStatus] = useState<Delivery_Status[]>([]);
  const deliveries = useInfiniteQuery(
    WebhookService.method.listDeliveries,
    { webhookId, limit: 50, startingAfter: "", status },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.deliveries.at(-1)?.id : undefined),
    },
  );
  const rows = deliveries.data?.pages.flatMap((p) => p.deliveries) ?? [];
  return (
    <Page title={webhook.data?.webhook ? `Deliveries to ${webhook.data.webhook.url}` : "Deliveries"}>
      <ErrorBox error={webhook.error ?? deliveries.error} />
      <WebhookStats webhookId={webhookId} />
      <ReplayFailed webhookId={webhookId} />
      <h2>Deliveries</h2>
      <CheckboxSet
        legend="Show only"
        options={STATUSES}
        chosen={status}
        onChange={setStatus}
        label={(s) => enumName(Delivery_StatusSchema, s)}
      />
      {deliveries.isPending ? <Loading /> : null}
      {deliveries.data && rows.length === 0 ? (
        <p>No deliveries here. Send a test from the Webhooks page.</p>
      ) : null}
      <ul class="cards">
        {rows.map((d) => (
          <DeliveryCard key={d.id} delivery={d} />
        ))}
      </ul>
      <LoadMore list={deliveries} />
    </Page>
  );
}

function ReplayFailed({ webhookId }: { webhookId: string }) {
  const client = useQueryClient();
  const replay = useMutation(WebhookService.method.replayFailedDeliveries, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const dayAgo = new Date(Date.now() - 86_400_000).toISOString().slice(0, 16);
  return (
    <form
      class="panel inline"
      onSubmit={(e) => {
        e.preventDefault();
        const since = new Date(String(new FormData(e.currentTarget).get("since")));
        replay.mutate({ id: webhookId, since: timestampFromDate(since) });
      }}
    >
      <label>
        Replay every failed delivery since
        <input name="since" type="datetime-local" required defaultValue={dayAgo} />
      </label>
      <button type="submit" disabled={replay.isPending}>
        Replay failed
      </button>
      {replay.data ? (
        <p role="status">
          {replay.data.queued} replayed{replay.data.hasMore ? "; more remain: replay again in a moment" : ""}.
        </p>
      ) : null}
      <ErrorBox error={replay.error} />
    </form>
  );
}

function DeliveryCard({ delivery: d }: { delivery: Delivery }) {
  const client = useQueryClient();
  const replay = useMutation(WebhookService.method.replayDelivery, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const [open, setOpen] = useState(false);
  const attempts = useQuery(WebhookService.method.listDeliveryAttempts, open ? { id: d.id } : skipToken);
  const status = enumName(Delivery_StatusSchema, d.status);
  return (
    <li class="card">
      <h3>
        <code>{d.eventType}</code>{" "}
        <span class={status === "DELIVERED" ? "ok" : status === "PENDING" ? "" : "bad"}>{status}</span>
      </h3>
      <p>
        <code class="muted">{d.eventId}</code> · <code class="muted">{d.id}</code>
      </p>
      <p>
        {d.attempt} attempt(s); last answer{" "}
        {d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : d.lastError || "none yet"}
        {d.lastLatencyMs ? ` in ${d.lastLatencyMs} ms` : ""}
        {d.nextAttemptAt ? (
          <>
            ; next attempt <Time at={d.nextAttemptAt} />
          </>
        ) : null}
      </p>
      <div class="actions">
        <button type="button" class="secondary" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? "Hide attempts" : "Show attempts"}
        </button>
        <button
          type="button"
          class="secondary"
          disabled={replay.isPending}
          onClick={() => replay.mutate({ id: d.id })}
        >
          Replay
        </button>
      </div>
      <ErrorBox error={replay.error ?? attempts.error} />
      {open && attempts.data ? (
        <ol class="attempts">
          {attempts.data.attempts.map((a) => (
            <li key={a.attempt}>
              <p>
                <Time at={a.startedAt} />: {a.statusCode ? `HTTP ${a.statusCode}` : a.error} in {a.latencyMs}{" "}
                ms
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
          ))}
        </ol>
      ) : null}
    </li>
  );
}
