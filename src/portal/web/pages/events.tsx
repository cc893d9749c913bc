import { useInfiniteQuery, useQuery } from "@connectrpc/connect-query";
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import {
  type Delivery,
  Delivery_StatusSchema,
  type Event,
  WebhookService,
} from "../../../../gen/partner/v1/webhooks_pb.ts";
import { IdLink } from "../ids.tsx";
import { ListTable } from "../table.tsx";
import { ErrorBox, enumName, Loading, LoadMore, Page, StatusBadge, Time } from "../ui.tsx";
import { EVENT_FILTERS } from "./webhooks.tsx";

/** The event types themselves (the subscription filters without their wildcards). */
const TYPES = EVENT_FILTERS.filter((f) => !f.includes("*"));

const EVENT_COLUMNS = [
  { head: "Sent", cell: (e: Event) => <Time at={e.createdAt} relative /> },
  { head: "Type", cell: (e: Event) => <code>{e.type}</code> },
  { head: "Event", cell: (e: Event) => <IdLink id={e.id} /> },
];

/** The events sent to this environment's webhooks, newest first, by type. */
export function EventsPage() {
  const [type, setType] = useState("");
  const events = useInfiniteQuery(
    WebhookService.method.listEvents,
    { limit: 50, startingAfter: "", type },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.events.at(-1)?.id : undefined),
    },
  );
  return (
    <Page title="Events">
      <label>
        Type
        <select value={type} onChange={(e) => setType(e.currentTarget.value)}>
          <option value="">Any</option>
          {TYPES.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>
      {events.isPending ? <Loading /> : null}
      <ErrorBox error={events.error} />
      <ListTable
        label="Events"
        columns={EVENT_COLUMNS}
        rows={events.data?.pages.flatMap((p) => p.events)}
        rowKey={(e) => e.id}
        empty="No events yet. Events are kept only when a webhook subscribed to them: add one on the Webhooks page."
      />
      <LoadMore list={events} />
    </Page>
  );
}

/** The events about one object or one user, newest first (on its page). */
export function EventsAbout(props: { objectId?: string; userId?: string; empty: ComponentChildren }) {
  const events = useQuery(WebhookService.method.listEvents, {
    limit: 50,
    objectId: props.objectId ?? "",
    userId: props.userId ?? "",
  });
  return (
    <>
      <ErrorBox error={events.error} />
      <ListTable
        label="Events"
        columns={EVENT_COLUMNS}
        rows={events.data?.events}
        rowKey={(e) => e.id}
        empty={props.empty}
      />
    </>
  );
}

/** The deliveries of an event, or of a subscription, as a table. */
export const DELIVERY_COLUMNS = [
  { head: "Delivery", cell: (d: Delivery) => <IdLink id={d.id} /> },
  {
    head: "Status",
    cell: (d: Delivery) => <StatusBadge status={enumName(Delivery_StatusSchema, d.status)} />,
  },
  { head: "Attempts", cell: (d: Delivery) => d.attempt },
  { head: "Last answer", cell: (d: Delivery) => lastAnswer(d) },
  { head: "Created", cell: (d: Delivery) => <Time at={d.createdAt} relative /> },
];

/** What the endpoint last answered a delivery: its status and time, or the error, or nothing yet. */
export function lastAnswer(d: Delivery): string {
  if (d.lastStatusCode)
    return `HTTP ${d.lastStatusCode}${d.lastLatencyMs ? ` in ${d.lastLatencyMs} ms` : ""}`;
  return d.lastError || "none yet";
}

/** One event (`/events/evt_…`): its body as sent, and its delivery to each subscription. */
export function EventPage({ id }: { id: string }) {
  const event = useQuery(WebhookService.method.getEvent, { id });
  const e = event.data?.event;
  return (
    <Page title="Event" id={id} crumbs={[{ label: "Events", path: "/events" }]}>
      {event.isPending ? <Loading /> : null}
      <ErrorBox error={event.error} />
      {e ? (
        <>
          <dl class="facts">
            <dt>Type</dt>
            <dd>
              <code>{e.type}</code>
            </dd>
            <dt>Sent</dt>
            <dd>
              <Time at={e.createdAt} />
            </dd>
          </dl>
          <h2>Deliveries</h2>
          <ListTable
            label="Deliveries"
            columns={[
              { head: "Webhook", cell: (d: Delivery) => <IdLink id={d.webhookId} /> },
              ...DELIVERY_COLUMNS,
            ]}
            rows={e.deliveries}
            rowKey={(d) => d.id}
            empty="No subscription took this event."
          />
          <h2>Body</h2>
          <pre>{JSON.stringify(e.payload, null, 2)}</pre>
        </>
      ) : null}
    </Page>
  );
}
