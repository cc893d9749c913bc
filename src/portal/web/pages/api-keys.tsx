import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import { type ApiKey, ApiKey_StatusSchema, ApiKeyService } from "../../../../gen/partner/v1/api_keys_pb.ts";
import type { Member } from "../../../../gen/portal/v1/members_pb.ts";
import type { Environment } from "../api.ts";
import { ErrorBox, enumName, Loading, Page, ShownOnce, Time } from "../ui.tsx";

/** The environment's API keys: issue (shown once), roll with an overlap, revoke. Viewers only look. */
export function ApiKeysPage({ me, env }: { me: Member; env: Environment }) {
  const client = useQueryClient();
  const keys = useQuery(ApiKeyService.method.listApiKeys, {});
  const [secret, setSecret] = useState<string>();
  const done = (key: string) => {
    setSecret(key);
    void client.invalidateQueries();
  };
  const issue = useMutation(ApiKeyService.method.issueApiKey, { onSuccess: (r) => done(r.key) });
  const writer = me.role !== "viewer";
  const active = keys.data?.apiKeys.some((k) => enumName(ApiKey_StatusSchema, k.status) === "ACTIVE");
  return (
    <Page title={`API keys (${env})`}>
      <p>
        One key per environment, sent as <code>Authorization: Bearer …</code>. Only its first characters are
        kept for display: a key is shown once, when it is made.
      </p>
      {secret ? <ShownOnce title={`Your new ${env} API key.`} value={secret} /> : null}
      {keys.isPending ? <Loading /> : null}
      <ErrorBox error={keys.error ?? issue.error} />
      {writer && keys.data && !active ? (
        <button type="button" disabled={issue.isPending} onClick={() => issue.mutate({})}>
          Issue a {env} key
        </button>
      ) : null}
      <ul class="cards">
        {keys.data?.apiKeys.map((k) => (
          <KeyCard key={k.id} apiKey={k} writer={writer} onKey={done} />
        ))}
      </ul>
    </Page>
  );
}

function KeyCard(props: { apiKey: ApiKey; writer: boolean; onKey: (key: string) => void }) {
  const { apiKey: k, writer, onKey } = props;
  const client = useQueryClient();
  const roll = useMutation(ApiKeyService.method.rollApiKey, { onSuccess: (r) => onKey(r.key) });
  const revoke = useMutation(ApiKeyService.method.revokeApiKey, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const [hours, setHours] = useState(24);
  const status = enumName(ApiKey_StatusSchema, k.status);
  return (
    <li class="card">
      <h2>
        <code>{k.prefix}…</code> <span class={status === "ACTIVE" ? "ok" : "muted"}>{status}</span>
      </h2>
      <p>
        <code class="muted">{k.id}</code> · issued <Time at={k.createdAt} />
        {k.expiresAt ? (
          <>
            {" "}
            · works until <Time at={k.expiresAt} />
          </>
        ) : null}
      </p>
      {writer && status === "ACTIVE" ? (
        <div class="actions">
          <label>
            Old key keeps working for (hours, 0 to 168)
            <input
              type="number"
              min={0}
              max={168}
              value={hours}
              onInput={(e) => setHours(Number(e.currentTarget.value))}
            />
          </label>
          <button
            type="button"
            disabled={roll.isPending}
            onClick={() => roll.mutate({ id: k.id, expiresInHours: hours })}
          >
            Roll
          </button>
          <button
            type="button"
            class="danger"
            disabled={revoke.isPending}
            onClick={() =>
              confirm("Revoke this key? Every request with it fails at once.") && revoke.mutate({ id: k.id })
            }
          >
            Revoke
          </button>
        </div>
      ) : null}
      <ErrorBox error={roll.error ?? revoke.error} />
    </li>
  );
}
