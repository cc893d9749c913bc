import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useContext } from "preact/hooks";
import {
  type Consent,
  Consent_RevokedBySchema,
  Consent_SourceSchema,
  Consent_Status,
  Consent_StatusSchema,
  type ConsentLink,
  ConsentLink_Status,
  ConsentLink_StatusSchema,
  ConsentService,
} from "../../../../gen/partner/v1/consents_pb.ts";
import { SandboxService } from "../../../../gen/partner/v1/sandbox_pb.ts";
import { CanWriteContext } from "../api.ts";
import { IdLink } from "../ids.tsx";
import { ErrorBox, enumName, Loading, Page, StatusBadge, Time } from "../ui.tsx";
import { EventsAbout } from "./events.tsx";
import { SandboxActions } from "./sandbox.tsx";

const CONSENTS = [{ label: "Consents", path: "/consents" }];

/** One consent (`/consents/cns_…`): what it allows, who granted and revoked it, and the events it raised. */
export function ConsentPage({ id }: { id: string }) {
  const consent = useQuery(ConsentService.method.getConsent, { id });
  const c = consent.data?.consent;
  return (
    <Page title="Consent" id={id} crumbs={CONSENTS}>
      {consent.isPending ? <Loading /> : null}
      <ErrorBox error={consent.error} />
      {c ? (
        <>
          <ConsentFacts consent={c} />
          {c.status === Consent_Status.ACTIVE ? (
            <SandboxActions
              id={id}
              title="Act in the sandbox"
              actions={[{ name: "Revoke as the person", method: SandboxService.method.revokeConsentAsUser }]}
            />
          ) : null}
          <h2>Events</h2>
          <EventsAbout objectId={id} empty="No events about this consent were sent to a webhook." />
        </>
      ) : null}
    </Page>
  );
}

function ConsentFacts({ consent: c }: { consent: Consent }) {
  const client = useQueryClient();
  const revoke = useMutation(ConsentService.method.revokeConsent, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const status = enumName(Consent_StatusSchema, c.status);
  const canWrite = useContext(CanWriteContext);
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge status={status} />
        {c.revokedAt ? (
          <>
            {" "}
            by {enumName(Consent_RevokedBySchema, c.revokedBy)} on <Time at={c.revokedAt} />
          </>
        ) : null}
      </dd>
      <dt>User</dt>
      <dd>
        <IdLink id={c.userId} full />
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
      {c.supersededBy ? (
        <>
          <dt>Replaced by</dt>
          <dd>
            <IdLink id={c.supersededBy} />
          </dd>
        </>
      ) : null}
      {status === "ACTIVE" && canWrite ? (
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

/** One consent link (`/consent-links/cnl_…`): what it asks, for whom, and the consent it became. */
export function ConsentLinkPage({ id }: { id: string }) {
  const link = useQuery(ConsentService.method.getConsentLink, { id });
  const l = link.data?.consentLink;
  return (
    <Page title="Consent link" id={id} crumbs={CONSENTS}>
      {link.isPending ? <Loading /> : null}
      <ErrorBox error={link.error} />
      {l ? <LinkFacts link={l} /> : null}
      {l?.status === ConsentLink_Status.PENDING ? (
        <SandboxActions
          id={id}
          title="Act in the sandbox"
          actions={[
            { name: "Accept as the person", method: SandboxService.method.acceptConsentLink },
            { name: "Decline as the person", method: SandboxService.method.declineConsentLink },
          ]}
        />
      ) : null}
    </Page>
  );
}

function LinkFacts({ link: l }: { link: ConsentLink }) {
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge status={enumName(ConsentLink_StatusSchema, l.status)} />
        {l.decidedAt ? (
          <>
            {" "}
            on <Time at={l.decidedAt} />
          </>
        ) : null}
      </dd>
      <dt>Phone</dt>
      <dd>ending {l.phoneNumberLast4}</dd>
      <dt>Scopes</dt>
      <dd>{l.scopes.join(", ")}</dd>
      <dt>Ledger window</dt>
      <dd>
        {l.ledgerWindowDays} days by default, up to {l.maxLedgerWindowDays}
      </dd>
      <dt>Made</dt>
      <dd>
        <Time at={l.createdAt} />, works until <Time at={l.expiresAt} />
      </dd>
      <dt>Link</dt>
      <dd>
        <code>{l.url}</code>
      </dd>
      <dt>Consent</dt>
      <dd>{l.consentId ? <IdLink id={l.consentId} /> : <span class="muted">none yet</span>}</dd>
    </dl>
  );
}
