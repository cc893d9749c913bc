import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { useInfiniteQuery, useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useContext, useState } from "preact/hooks";
import {
  type Delivery,
  Delivery_Status,
  Delivery_StatusSchema,
  WebhookService,
} from "../../../../gen/partner/v1/webhooks_pb.ts";
import { CanWriteContext } from "../api.ts";
import { IdLink } from "../ids.tsx";
import { ListTable } from "../table.tsx";
import { CheckboxSet, ErrorBox, enumName, Loading, LoadMore, Page } from "../ui.tsx";
import { WebhookHealth } from "../webhook-health.tsx";
import { DELIVERY_COLUMNS } from "./events.tsx";
import { WebhookStats } from "./webhook-stats.tsx";

const STATUSES = [
  Delivery_Status.PENDING,
  Delivery_Status.FAILED,
  Delivery_Status.DELIVERED,
  Delivery_Status.GIVEN_UP,
];

const WEBHOOKS = [{ label: "Webhooks", path: "/webhooks" }];

/**
 * One subscription (`/webhooks/whk_…`): its health, its last 24 hours, its deliveries (newest first, filtered by
 * status; each links to its attempts), and "replay every failed delivery since …".
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
  const w = webhook.data?.webhook;
  const canWrite = useContext(CanWriteContext);
  return (
    <Page title={w ? `Deliveries to ${w.url}` : "Subscription"} id={webhookId} crumbs={WEBHOOKS}>
      {webhook.isPending ? <Loading /> : null}
      {/* The subscription's own error alone: its deliveries' would say the same. */}
      <ErrorBox error={webhook.error ?? (w ? deliveries.error : undefined)} />
      {w ? (
        <>
          <dl class="facts">
            <dt>Health</dt>
            <dd>
              <WebhookHealth webhook={w} />
            </dd>
            <dt>Events</dt>
            <dd>{w.events.join(", ")}</dd>
          </dl>
          <WebhookStats webhookId={webhookId} />
          {canWrite ? <ReplayFailed webhookId={webhookId} /> : null}
          <h2>Deliveries</h2>
          <CheckboxSet
            legend="Show only"
            options={STATUSES}
            chosen={status}
            onChange={setStatus}
            label={(s) => enumName(Delivery_StatusSchema, s)}
          />
          {deliveries.isPending ? <Loading /> : null}
          <ListTable
            label="Deliveries"
            columns={[
              { head: "Event", cell: (d: Delivery) => <IdLink id={d.eventId} /> },
              { head: "Type", cell: (d: Delivery) => <code>{d.eventType}</code> },
              ...DELIVERY_COLUMNS,
            ]}
            rows={deliveries.data?.pages.flatMap((p) => p.deliveries)}
            rowKey={(d) => d.id}
            empty={
              status.length
                ? "No delivery has these statuses."
                : "No deliveries yet. Send a test from the Webhooks page to see one here within seconds."
            }
          />
          <LoadMore list={deliveries} />
        </>
      ) : null}
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
