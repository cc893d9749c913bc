import { useInfiniteQuery, useMutation } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import {
  type Consent,
  Consent_StatusSchema,
  type ConsentLink,
  ConsentLink_StatusSchema,
  ConsentService,
} from "../../../../gen/partner/v1/consents_pb.ts";
import { IdLink } from "../ids.tsx";
import { Qr } from "../qr.tsx";
import { ListTable } from "../table.tsx";
import { CheckboxSet, CopyButton, ErrorBox, enumName, LoadMore, Page, StatusBadge, Time } from "../ui.tsx";

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

/** Consent links (create, copy, QR code) and consents, each a link to its page. */
export function ConsentsPage() {
  return (
    <Page title="Consents">
      <CreateLink />
      <RecentLinks />
      <RecentConsents />
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
            Link <IdLink id={link.id} /> for the phone ending {link.phoneNumberLast4}, until{" "}
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

const LINK_COLUMNS = [
  { head: "Link", cell: (l: ConsentLink) => <IdLink id={l.id} /> },
  {
    head: "Status",
    cell: (l: ConsentLink) => <StatusBadge status={enumName(ConsentLink_StatusSchema, l.status)} />,
  },
  { head: "Phone", cell: (l: ConsentLink) => `…${l.phoneNumberLast4}` },
  { head: "Made", cell: (l: ConsentLink) => <Time at={l.createdAt} relative /> },
  { head: "Consent", cell: (l: ConsentLink) => (l.consentId ? <IdLink id={l.consentId} /> : "") },
];

const CONSENT_COLUMNS = [
  { head: "Consent", cell: (c: Consent) => <IdLink id={c.id} /> },
  { head: "Status", cell: (c: Consent) => <StatusBadge status={enumName(Consent_StatusSchema, c.status)} /> },
  { head: "User", cell: (c: Consent) => <IdLink id={c.userId} /> },
  { head: "Granted", cell: (c: Consent) => <Time at={c.grantedAt} relative /> },
];

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
      <ListTable
        label="Recent consent links"
        columns={LINK_COLUMNS}
        rows={rows}
        rowKey={(l) => l.id}
        empty={
          status ? `No link is ${status}.` : "No consent links yet: make one above and send it to the person."
        }
      />
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
      <ListTable
        label="Recent consents"
        columns={CONSENT_COLUMNS}
        rows={rows}
        rowKey={(c) => c.id}
        empty={
          status ? `No consent is ${status}.` : "No consents yet: a person consents by accepting a link."
        }
      />
      <LoadMore list={consents} />
    </div>
  );
}
