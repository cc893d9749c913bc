import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import { type Webhook, WebhookService } from "../../../../gen/partner/v1/webhooks_pb.ts";
import { IdLink } from "../ids.tsx";
import { onLinkClick } from "../router.ts";
import {
  CheckboxSet,
  ErrorBox,
  FieldError,
  fieldErrorId,
  fieldErrors,
  Loading,
  Page,
  ShownOnce,
} from "../ui.tsx";
import { WebhookHealth } from "../webhook-health.tsx";

/** The event types and wildcards a subscription may name (the contract's list). */
export const EVENT_FILTERS = [
  "*",
  "consent.*",
  "consent.granted",
  "consent.revoked",
  "standing.tier_changed",
  "DISBURSEMENT_DELIVERED",
  "REPAYMENT_*",
  "REPAYMENT_COLLECTED",
  "REPAYMENT_FAILED",
] as const;

/** Webhook subscriptions: create, send a test, rotate the secret, delete; each with its last 24 hours. */
export function WebhooksPage() {
  const client = useQueryClient();
  const list = useQuery(WebhookService.method.listWebhooks, {});
  const refresh = () => client.invalidateQueries();
  const [secret, setSecret] = useState<{ title: string; value: string }>();
  return (
    <Page title="Webhooks">
      {secret ? <ShownOnce title={secret.title} value={secret.value} /> : null}
      <CreateWebhook
        onCreated={(w) => {
          setSecret({ title: `Signing secret of ${w.url}.`, value: w.secret });
          void refresh();
        }}
      />
      <h2>Subscriptions</h2>
      {list.isPending ? <Loading /> : null}
      <ErrorBox error={list.error} />
      {list.data?.webhooks.length === 0 ? <p>No subscriptions yet.</p> : null}
      <ul class="cards">
        {list.data?.webhooks.map((w) => (
          <WebhookCard
            key={w.id}
            webhook={w}
            onChanged={refresh}
            onSecret={(value) => setSecret({ title: `New signing secret of ${w.url}.`, value })}
          />
        ))}
      </ul>
    </Page>
  );
}

function CreateWebhook({ onCreated }: { onCreated: (w: Webhook) => void }) {
  const create = useMutation(WebhookService.method.createWebhook);
  const refused = fieldErrors(create.error);
  const [events, setEvents] = useState<string[]>(["*"]);
  return (
    <form
      class="panel"
      onSubmit={(e) => {
        e.preventDefault();
        const form = new FormData(e.currentTarget);
        create.mutate(
          { url: String(form.get("url")), events, description: String(form.get("description") ?? "") },
          { onSuccess: (res) => res.webhook && onCreated(res.webhook) },
        );
      }}
    >
      <h2>New subscription</h2>
      <label>
        Endpoint URL
        <input
          name="url"
          type="url"
          required
          inputMode="url"
          placeholder="https://example.com/webhooks"
          aria-invalid={"url" in refused}
          aria-describedby={"url" in refused ? fieldErrorId("new-webhook", "url") : undefined}
        />
        <FieldError error={create.error} form="new-webhook" name="url" />
      </label>
      <label>
        Description <span class="muted">(optional)</span>
        <input
          name="description"
          maxLength={500}
          aria-invalid={"description" in refused}
          aria-describedby={"description" in refused ? fieldErrorId("new-webhook", "description") : undefined}
        />
        <FieldError error={create.error} form="new-webhook" name="description" />
      </label>
      <CheckboxSet
        legend="Events"
        options={EVENT_FILTERS}
        chosen={events}
        onChange={setEvents}
        label={(f) => <code>{f}</code>}
      />
      <ErrorBox error={create.error} />
      <button type="submit" disabled={create.isPending}>
        Create subscription
      </button>
    </form>
  );
}

function WebhookCard(props: { webhook: Webhook; onChanged: () => void; onSecret: (s: string) => void }) {
  const { webhook: w, onChanged, onSecret } = props;
  const test = useMutation(WebhookService.method.sendTestEvent);
  const rotate = useMutation(WebhookService.method.rotateWebhookSecret);
  const remove = useMutation(WebhookService.method.deleteWebhook);
  const [sent, setSent] = useState(false);
  const [editing, setEditing] = useState(false);
  const s = w.stats;
  return (
    <li class="card">
      <h3>
        <a href={`/portal/webhooks/${w.id}`} onClick={onLinkClick}>
          {w.url}
        </a>
      </h3>
      <p>
        <WebhookHealth webhook={w} /> · <IdLink id={w.id} />
      </p>
      <p>
        Events:{" "}
        {w.events.map((e) => (
          <code key={e}>{e} </code>
        ))}
        {w.description ? ` · ${w.description}` : ""}
      </p>
      {s ? (
        <p>
          Last 24 h: {s.delivered} delivered, {s.failed} failed; latency p50 {s.p50LatencyMs} ms, p95{" "}
          {s.p95LatencyMs} ms.
        </p>
      ) : null}
      {editing ? (
        <EditWebhook
          webhook={w}
          onDone={() => {
            setEditing(false);
            onChanged();
          }}
        />
      ) : null}
      <div class="actions">
        <button type="button" class="secondary" aria-expanded={editing} onClick={() => setEditing(!editing)}>
          {editing ? "Close the editor" : "Edit"}
        </button>
        <button
          type="button"
          disabled={test.isPending}
          onClick={() =>
            test.mutate(
              { id: w.id },
              {
                onSuccess: () => {
                  setSent(true);
                  onChanged();
                },
              },
            )
          }
        >
          Send test
        </button>
        <button
          type="button"
          class="secondary"
          disabled={rotate.isPending}
          onClick={() =>
            confirm(
              "Rotate the signing secret? The old one keeps signing beside the new one for 24 hours.",
            ) && rotate.mutate({ id: w.id }, { onSuccess: (r) => r.webhook && onSecret(r.webhook.secret) })
          }
        >
          Rotate secret
        </button>
        <button
          type="button"
          class="danger"
          disabled={remove.isPending}
          onClick={() =>
            confirm(`Delete the subscription to ${w.url}? Its pending deliveries are not sent.`) &&
            remove.mutate({ id: w.id }, { onSuccess: onChanged })
          }
        >
          Delete
        </button>
      </div>
      {sent ? <p role="status">Test event queued: see its delivery on the subscription's page.</p> : null}
      <ErrorBox error={test.error ?? rotate.error ?? remove.error} />
    </li>
  );
}

/** Changes a subscription's URL, description and event filters (only what changed is sent). */
function EditWebhook({ webhook: w, onDone }: { webhook: Webhook; onDone: () => void }) {
  const update = useMutation(WebhookService.method.updateWebhook, { onSuccess: onDone });
  const [events, setEvents] = useState<string[]>(w.events);
  return (
    <form
      class="panel"
      aria-label={`Edit the subscription to ${w.url}`}
      onSubmit={(e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        const url = String(f.get("url") ?? "");
        const description = String(f.get("description") ?? "");
        update.mutate({
          id: w.id,
          url: url !== w.url ? url : undefined,
          description: description !== w.description ? description : undefined,
          addEvents: events.filter((x) => !w.events.includes(x)),
          removeEvents: w.events.filter((x) => !events.includes(x)),
        });
      }}
    >
      <label>
        Endpoint URL
        <input name="url" type="url" required defaultValue={w.url} />
      </label>
      <label>
        Description
        <input name="description" maxLength={500} defaultValue={w.description} />
      </label>
      <CheckboxSet
        legend="Events"
        options={EVENT_FILTERS}
        chosen={events}
        onChange={setEvents}
        label={(f) => <code>{f}</code>}
      />
      <ErrorBox error={update.error} />
      <button type="submit" disabled={update.isPending || events.length === 0}>
        Save
      </button>
    </form>
  );
}
