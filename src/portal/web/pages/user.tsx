import { useQuery } from "@connectrpc/connect-query";
import {
  type Consent,
  Consent_StatusSchema,
  ConsentService,
} from "../../../../gen/partner/v1/consents_pb.ts";
import {
  type Disbursement,
  Disbursement_StatusSchema,
  DisbursementService,
} from "../../../../gen/partner/v1/disbursements_pb.ts";
import { IdLink } from "../ids.tsx";
import { ListTable } from "../table.tsx";
import { ErrorBox, enumName, Page, StatusBadge, Time } from "../ui.tsx";
import { naira } from "./disbursements.tsx";
import { EventsAbout } from "./events.tsx";

const CONSENT_COLUMNS = [
  { head: "Consent", cell: (c: Consent) => <IdLink id={c.id} /> },
  { head: "Status", cell: (c: Consent) => <StatusBadge status={enumName(Consent_StatusSchema, c.status)} /> },
  { head: "Scopes", cell: (c: Consent) => c.scopes.join(", ") },
  { head: "Granted", cell: (c: Consent) => <Time at={c.grantedAt} /> },
  { head: "Until", cell: (c: Consent) => <Time at={c.expiresAt} /> },
];

const DISBURSEMENT_COLUMNS = [
  { head: "Disbursement", cell: (d: Disbursement) => <IdLink id={d.id} /> },
  {
    head: "Status",
    cell: (d: Disbursement) => <StatusBadge status={enumName(Disbursement_StatusSchema, d.status)} />,
  },
  { head: "Principal", cell: (d: Disbursement) => naira(d.principalKobo) },
  { head: "Repayable", cell: (d: Disbursement) => naira(d.totalRepayableKobo) },
  { head: "Created", cell: (d: Disbursement) => <Time at={d.createdAt} /> },
];

/**
 * Everything this partner holds about one user (`/users/usr_…`), in this environment: their consents (the one
 * in force first), their disbursements and the events about them. Their data itself is read by snapshot only.
 */
export function UserPage({ id }: { id: string }) {
  const consents = useQuery(ConsentService.method.listConsents, { userId: id, limit: 100 });
  const disbursements = useQuery(DisbursementService.method.listDisbursements, { userId: id, limit: 100 });
  return (
    <Page title="User" id={id}>
      <h2>Consents</h2>
      <ErrorBox error={consents.error} />
      <ListTable
        label="Consents"
        columns={CONSENT_COLUMNS}
        rows={consents.data?.consents}
        rowKey={(c) => c.id}
        empty="This user has never consented to you: send them a consent link from the Consents page."
      />
      <h2>Disbursements</h2>
      <ErrorBox error={disbursements.error} />
      <ListTable
        label="Disbursements"
        columns={DISBURSEMENT_COLUMNS}
        rows={disbursements.data?.disbursements}
        rowKey={(d) => d.id}
        empty="No disbursements to this user."
      />
      <h2>Events</h2>
      <EventsAbout userId={id} empty="No events about this user were sent to a webhook." />
    </Page>
  );
}
