import { useInfiniteQuery, useQuery } from "@connectrpc/connect-query";
import { useState } from "preact/hooks";
import { ApiKeyService } from "../../../../gen/partner/v1/api_keys_pb.ts";
import {
  ListRequestsRequest_Outcome as Outcome,
  RequestLogService,
} from "../../../../gen/partner/v1/requests_pb.ts";
import { IdLink } from "../ids.tsx";
import { navigate } from "../router.ts";
import { ErrorBox, Loading, LoadMore, Page, TableWrap, Time } from "../ui.tsx";

/** A request id anywhere in what was pasted (an error body, a log line, a header). */
const REQUEST_ID = /req_[0-9A-HJKMNP-TV-Z]{26}/;

const OUTCOMES: { value: Outcome; label: string }[] = [
  { value: Outcome.OUTCOME_UNSPECIFIED, label: "All" },
  { value: Outcome.FAILED, label: "Failed (4xx and 5xx)" },
  { value: Outcome.CLIENT_ERROR, label: "4xx" },
  { value: Outcome.SERVER_ERROR, label: "5xx" },
  { value: Outcome.SUCCEEDED, label: "Succeeded" },
];

/** A status as a badge: its class says success, the caller's error or ours. */
function StatusBadge({ status }: { status: number }) {
  const kind = status >= 500 ? "bad" : status >= 400 ? "warn" : "good";
  return <span class={`badge ${kind}`}>{status}</span>;
}

/** Finds a call by its request id: pasted text with a `req_` id in it goes to that call's page. */
function FindRequest() {
  const [wrong, setWrong] = useState(false);
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        const id = REQUEST_ID.exec(String(new FormData(e.currentTarget).get("id") ?? ""))?.[0];
        setWrong(!id);
        if (id) navigate(`/requests/${id}`);
      }}
    >
      <label>
        Request id
        <input
          name="id"
          required
          placeholder="req_…"
          autoComplete="off"
          spellcheck={false}
          aria-invalid={wrong}
          aria-describedby={wrong ? "find-request-error" : undefined}
        />
      </label>
      <button type="submit">Find</button>
      {wrong ? (
        <p id="find-request-error" class="error" role="alert">
          That holds no request id: it starts with req_ and has 26 letters and digits after.
        </p>
      ) : null}
    </form>
  );
}

/** What the list is narrowed to. */
interface Filter {
  outcome: Outcome;
  errorCode: string;
  route: string;
  apiKeyId: string;
}

/** Every call made with this partner's keys in the last 30 days, newest first, filtered. */
export function RequestsPage() {
  const [filter, setFilter] = useState<Filter>({
    outcome: Outcome.OUTCOME_UNSPECIFIED,
    errorCode: "",
    route: "",
    apiKeyId: "",
  });
  const keys = useQuery(ApiKeyService.method.listApiKeys, {});
  const list = useInfiniteQuery(
    RequestLogService.method.listRequests,
    { ...filter, limit: 50, startingAfter: "" },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.nextStartingAfter : undefined),
    },
  );
  const rows = list.data?.pages.flatMap((p) => p.requests) ?? [];
  return (
    <Page title="Requests">
      <p class="muted">
        Every call made with this environment's API keys in the last 30 days: what it asked (its route, never
        its data), how it was answered, and, when it failed, the error body it got.
      </p>
      <FindRequest />
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          setFilter({
            outcome: Number(f.get("outcome")) as Outcome,
            errorCode: String(f.get("errorCode") ?? "").trim(),
            route: String(f.get("route") ?? "").trim(),
            apiKeyId: String(f.get("apiKeyId") ?? ""),
          });
        }}
      >
        <label>
          Outcome
          <select name="outcome" defaultValue={String(filter.outcome)}>
            {OUTCOMES.map((o) => (
              <option key={o.value} value={o.value}>
                {o.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Error code
          <input
            name="errorCode"
            placeholder="consent_revoked"
            pattern="[a-z][a-z0-9_]{0,63}"
            spellcheck={false}
          />
        </label>
        <label>
          Route
          <input name="route" placeholder="/partner/v1/users/{user_id}/snapshot" spellcheck={false} />
        </label>
        <label>
          Key
          <select name="apiKeyId" defaultValue="">
            <option value="">Any</option>
            {keys.data?.apiKeys.map((k) => (
              <option key={k.id} value={k.id}>
                {k.prefix}…
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Show</button>
        <button type="button" class="secondary" onClick={() => void list.refetch()}>
          Refresh
        </button>
      </form>
      <ErrorBox error={list.error} />
      {list.isPending ? <Loading /> : null}
      {list.data && !rows.length ? (
        <p>
          No calls {list.hasNextPage ? "in the calls looked at so far" : "match"}. Calls appear here within a
          second of their answer; make one with a key of this environment.
        </p>
      ) : null}
      {rows.length ? (
        <TableWrap label="Requests, newest first">
          <table class="dense">
            <caption class="visually-hidden">Requests, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Status</th>
                <th scope="col">Method and route</th>
                <th scope="col">Error code</th>
                <th scope="col">Duration</th>
                <th scope="col">Key</th>
                <th scope="col">Face</th>
                <th scope="col">Request id</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.id}>
                  <td>
                    <Time at={r.createdAt} relative />
                  </td>
                  <td>
                    <StatusBadge status={r.status} />
                  </td>
                  <td>
                    <code>
                      {r.method} {r.route}
                    </code>
                  </td>
                  <td>{r.errorCode ? <code>{r.errorCode}</code> : null}</td>
                  <td>{r.durationMs} ms</td>
                  <td>
                    <code>{r.apiKeyPrefix || r.apiKeyId}</code>
                  </td>
                  <td>{r.face}</td>
                  <td>
                    <IdLink id={r.id} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <LoadMore list={list} />
    </Page>
  );
}

/** One call: how it was answered, and the error body it got. */
export function RequestPage({ id }: { id: string }) {
  const call = useQuery(RequestLogService.method.getRequest, { id });
  const r = call.data?.request;
  return (
    <Page title="Request" id={id} crumbs={[{ label: "Requests", path: "/requests" }]}>
      {call.isPending ? <Loading /> : null}
      <ErrorBox error={call.error} />
      {r ? (
        <>
          <dl class="facts">
            <dt>Time</dt>
            <dd>
              <Time at={r.createdAt} />
            </dd>
            <dt>Call</dt>
            <dd>
              <code>
                {r.method} {r.route}
              </code>{" "}
              over {r.face}
            </dd>
            <dt>Status</dt>
            <dd>
              <StatusBadge status={r.status} /> {r.errorCode ? <code>{r.errorCode}</code> : null}
            </dd>
            <dt>Duration</dt>
            <dd>{r.durationMs} ms</dd>
            <dt>Key</dt>
            <dd>
              <code>{r.apiKeyPrefix || r.apiKeyId}</code>
            </dd>
          </dl>
          {r.error ? (
            <>
              <h2>Error body</h2>
              <pre>{JSON.stringify(r.error, null, 2)}</pre>
            </>
          ) : null}
        </>
      ) : null}
    </Page>
  );
}
