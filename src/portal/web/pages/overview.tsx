import { useQuery } from "@connectrpc/connect-query";
import { ApiKey_StatusSchema, ApiKeyService } from "../../../../gen/partner/v1/api_keys_pb.ts";
import { type Event, Webhook_Status, WebhookService } from "../../../../gen/partner/v1/webhooks_pb.ts";
import type { Environment } from "../api.ts";
import { IdLink } from "../ids.tsx";
import { onLinkClick } from "../router.ts";
import { ListTable } from "../table.tsx";
import { ErrorBox, enumName, Loading, Page, Time } from "../ui.tsx";

/** The environment at a glance: its API key, its webhooks' health, and the latest events sent. */
export function OverviewPage({ env }: { env: Environment }) {
  const keys = useQuery(ApiKeyService.method.listApiKeys, {});
  const hooks = useQuery(WebhookService.method.listWebhooks, {});
  const events = useQuery(WebhookService.method.listEvents, { limit: 10 });
  const live = keys.data?.apiKeys.filter((k) => enumName(ApiKey_StatusSchema, k.status) !== "REVOKED") ?? [];
  const list = hooks.data?.webhooks ?? [];
  const disabled = list.filter((w) => w.status === Webhook_Status.DISABLED).length;
  const delivered = list.reduce((n, w) => n + (w.stats?.delivered ?? 0), 0);
  const failed = list.reduce((n, w) => n + (w.stats?.failed ?? 0), 0);
  return (
    <Page title={`Overview (${env})`}>
      <div class="cards-grid">
        <section class="card" aria-labelledby="ov-keys">
          <h2 id="ov-keys">API key</h2>
          {keys.isPending ? <Loading /> : null}
          <ErrorBox error={keys.error} />
          {keys.data && live.length === 0 ? <p class="bad">No key: issue one on the API keys page.</p> : null}
          {live.map((k) => (
            <p key={k.id}>
              <code>{k.prefix}…</code> {enumName(ApiKey_StatusSchema, k.status)}
              {k.expiresAt ? (
                <>
                  , until <Time at={k.expiresAt} />
                </>
              ) : null}
            </p>
          ))}
          <a href="/portal/api-keys" onClick={onLinkClick}>
            Manage keys
          </a>
        </section>
        <section class="card" aria-labelledby="ov-hooks">
          <h2 id="ov-hooks">Webhooks</h2>
          {hooks.isPending ? <Loading /> : null}
          <ErrorBox error={hooks.error} />
          {hooks.data ? (
            <p>
              {`${list.length} subscription(s)`}
              {disabled ? <span class="bad">{`, ${disabled} disabled`}</span> : null}
              {`. Last 24 hours: ${delivered} delivered, `}
              <span class={failed ? "bad" : ""}>{`${failed} failed`}</span>.
            </p>
          ) : null}
          <a href="/portal/webhooks" onClick={onLinkClick}>
            Webhooks
          </a>
        </section>
      </div>
      <h2>Latest events</h2>
      {events.isPending ? <Loading /> : null}
      <ErrorBox error={events.error} />
      <ListTable
        label="Latest events"
        columns={[
          { head: "Sent", cell: (e: Event) => <Time at={e.createdAt} relative /> },
          { head: "Type", cell: (e: Event) => <code>{e.type}</code> },
          { head: "Event", cell: (e: Event) => <IdLink id={e.id} /> },
        ]}
        rows={events.data?.events}
        rowKey={(e) => e.id}
        empty="No events yet. Add a webhook and send it a test: it shows here within seconds."
      />
    </Page>
  );
}
