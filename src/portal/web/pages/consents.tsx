import { useInfiniteQuery, useMutation, useQuery } from "@connectrpc/connect-query";
import { skipToken, useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import {
  type Consent,
  Consent_RevokedBySchema,
  Consent_SourceSchema,
  Consent_StatusSchema,
  ConsentLink_StatusSchema,
  ConsentService,
} from "../../../../gen/partner/v1/consents_pb.ts";
import { Qr } from "../qr.tsx";
import {
  CheckboxSet,
  CopyButton,
  ErrorBox,
  enumName,
  IdLookup,
  Loading,
  LoadMore,
  Page,
  Time,
} from "../ui.tsx";

/** The contract's scopes, in the words the person reads on the consent page. */
const SCOPES: { scope: string; label: string }[] = [
  { scope: "standing", label: "Standing tier and score" },
  { scope: "signals.standing", label: "Standing signals" },
  { scope: "signals.work", label: "Job and work signals" },
  { scope: "signals.cashflow", label: "Cashflow signals" },
  { scope: "ledger", label: "Ledger window (totals and counts)" },
  { scope: "kyc", label: "Identity verification" },
  { scope: "repayment_history", label: "Repayment history" },
];

/** Consent links (create, copy, QR code) and consents (look up, revoke). */
export function ConsentsPage() {
  return (
    <Page title="Consents">
      <CreateLink />
      <RecentLinks />
      <RecentConsents />
      <LookUpConsent />
    </Page>
  );
}

function CreateLink() {
  const client = useQueryClient();
  // The new link shows in the recent links at once (they are read again), not at the next reload.
  const create = useMutation(ConsentService.method.createConsentLink, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const [scopes, setScopes] = useState<string[]>(["standing"]);
  const link = create.data?.consentLink;
  return (
    <form
      class="panel"
      onSubmit={(e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        const max = Number(f.get("max") || 0);
        create.mutate({
          phoneNumber: String(f.get("phone") ?? "").replace(/\s+/g, ""),
          scopes,
          ledgerWindowDays: Number(f.get("window")),
          maxLedgerWindowDays: max,
          expiresInHours: Number(f.get("hours")),
        });
      }}
    >
      <h2>New consent link</h2>
      <label>
        The person's phone number (E.164)
        <input name="phone" type="tel" required pattern="\+[1-9][0-9]{7,14}" placeholder="+2348000000001" />
      </label>
      <CheckboxSet
        legend="What the person is asked to share"
        options={SCOPES.map((s) => s.scope)}
        chosen={scopes}
        onChange={setScopes}
        label={(scope) => SCOPES.find((s) => s.scope === scope)?.label}
      />
      <label>
        Default ledger window (days, 1 to 365)
        <input name="window" type="number" required min={1} max={365} defaultValue="90" />
      </label>
      <label>
        Longest window a read may ask for (days, up to 365; empty: the default window)
        <input name="max" type="number" min={1} max={365} />
      </label>
      <label>
        The link works for (hours, 1 to 168)
        <input name="hours" type="number" required min={1} max={168} defaultValue="24" />
      </label>
      <ErrorBox error={create.error} />
      <button type="submit" disabled={create.isPending || scopes.length === 0}>
        Create the link
      </button>
      {link ? (
        <div class="shown-once" role="status">
          <p>
            Link <code>{link.id}</code> for the phone ending {link.phoneNumberLast4}, until{" "}
            <Time at={link.expiresAt} />: {enumName(ConsentLink_StatusSchema, link.status)}.
          </p>
          <p>
            <code class="secret">{link.url}</code> <CopyButton value={link.url} label="Copy the link" />
          </p>
          <Qr text={link.url} label="QR code of the consent link" />
        </div>
      ) : null}
    </form>
  );
}

function LookUpConsent() {
  const [id, setId] = useState("");
  const consent = useQuery(ConsentService.method.getConsent, id ? { id } : skipToken);
  return (
    <div class="panel">
      <h2>Look up a consent</h2>
      <IdLookup label="Consent id" prefix="cns" onId={setId} />
      {id && consent.isPending ? <Loading /> : null}
      <ErrorBox error={consent.error} />
      {consent.data?.consent ? <ConsentCard consent={consent.data.consent} /> : null}
    </div>
  );
}

function ConsentCard({ consent: c }: { consent: Consent }) {
  const client = useQueryClient();
  const revoke = useMutation(ConsentService.method.revokeConsent, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const active = enumName(Consent_StatusSchema, c.status) === "ACTIVE";
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        {enumName(Consent_StatusSchema, c.status)}
        {c.revokedAt ? (
          <>
            {" "}
            by {enumName(Consent_RevokedBySchema, c.revokedBy)} on <Time at={c.revokedAt} />
          </>
        ) : null}
      </dd>
      <dt>User</dt>
      <dd>
        <code>{c.userId}</code>
      </dd>
      <dt>Scopes</dt>
      <dd>{c.scopes.join(", ")}</dd>
      <dt>Ledger window</dt>
      <dd>
        {c.ledgerWindowDays} days by default, up to {c.maxLedgerWindowDays}
      </dd>
      <dt>Granted</dt>
      <dd>
        <Time at={c.grantedAt} /> ({enumName(Consent_SourceSchema, c.source)}), until{" "}
        <Time at={c.expiresAt} />
      </dd>
      {active ? (
        <dd>
          <button
            type="button"
            class="danger"
            disabled={revoke.isPending}
            onClick={() =>
              confirm("Revoke this consent? Snapshot reads on it stop at once.") &&
              revoke.mutate({ id: c.id })
            }
          >
            Revoke
          </button>
          <ErrorBox error={revoke.error} />
        </dd>
      ) : null}
    </dl>
  );
}

const LINK_STATUSES = ["PENDING", "ACCEPTED", "DECLINED", "EXPIRED", "LOCKED"] as const;
const CONSENT_STATUSES = ["ACTIVE", "REVOKED", "EXPIRED"] as const;

/** A status filter: every status, or one. */
function StatusFilter(props: {
  label: string;
  options: readonly string[];
  value: string;
  onChange: (v: string) => void;
}) {
  return (
    <label>
      {props.label}
      <select value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        <option value="">Any</option>
        {props.options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    </label>
  );
}

function RecentLinks() {
  const [status, setStatus] = useState("");
  // The status filter's number; the generated enum type admits only its members, hence the cast below.
  const value = ConsentLink_StatusSchema.values.find((v) => v.name === status)?.number ?? 0;
  const links = useInfiniteQuery(
    ConsentService.method.listConsentLinks,
    { limit: 20, startingAfter: "", status: value as never },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.consentLinks.at(-1)?.id : undefined),
    },
  );
  const rows = links.data?.pages.flatMap((p) => p.consentLinks);
  return (
    <div class="panel">
      <h2>Recent consent links</h2>
      <StatusFilter label="Status" options={LINK_STATUSES} value={status} onChange={setStatus} />
      <ErrorBox error={links.error} />
      <ul>
        {rows?.map((l) => (
          <li key={l.id}>
            <code>{l.id}</code> {enumName(ConsentLink_StatusSchema, l.status)}, phone ending{" "}
            {l.phoneNumberLast4}, made <Time at={l.createdAt} />{" "}
            {l.consentId ? <code class="muted">{l.consentId}</code> : null}
          </li>
        ))}
      </ul>
      {rows?.length === 0 ? <p>None.</p> : null}
      <LoadMore list={links} />
    </div>
  );
}

function RecentConsents() {
  const [status, setStatus] = useState("");
  // The status filter's number; the generated enum type admits only its members, hence the cast below.
  const value = Consent_StatusSchema.values.find((v) => v.name === status)?.number ?? 0;
  const consents = useInfiniteQuery(
    ConsentService.method.listConsents,
    { limit: 20, startingAfter: "", status: value as never },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.consents.at(-1)?.id : undefined),
    },
  );
  const rows = consents.data?.pages.flatMap((p) => p.consents);
  return (
    <div class="panel">
      <h2>Recent consents</h2>
      <StatusFilter label="Status" options={CONSENT_STATUSES} value={status} onChange={setStatus} />
      <ErrorBox error={consents.error} />
      <ul>
        {rows?.map((c) => (
          <li key={c.id}>
            <code>{c.id}</code> {enumName(Consent_StatusSchema, c.status)} for <code>{c.userId}</code>,
            granted <Time at={c.grantedAt} />
          </li>
        ))}
      </ul>
      {rows?.length === 0 ? <p>None.</p> : null}
      <LoadMore list={consents} />
    </div>
  );
}
