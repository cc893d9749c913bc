import { useQuery } from "@connectrpc/connect-query";
import {
  type Disbursement,
  Disbursement_DestinationSchema,
  Disbursement_StatusSchema,
  DisbursementService,
  type Repayment,
  Repayment_Refund_StatusSchema,
  Repayment_StatusSchema,
} from "../../../../gen/partner/v1/disbursements_pb.ts";
import { SandboxService } from "../../../../gen/partner/v1/sandbox_pb.ts";
import { IdLink } from "../ids.tsx";
import { ListTable } from "../table.tsx";
import { ErrorBox, enumName, Loading, Page, StatusBadge, Time } from "../ui.tsx";
import { naira } from "./disbursements.tsx";
import { EventsAbout } from "./events.tsx";
import { SandboxActions } from "./sandbox.tsx";

/** A moment of a disbursement's life: when, what, and whether it went wrong. */
interface Step {
  at: string;
  what: string;
  bad?: boolean;
}

/**
 * What happened to a disbursement, oldest first: its offer, the person's acceptance of the mandate, the payout
 * (or its failure, reversal or cancellation), and each installment's collection and refund.
 */
export function timeline(d: Disbursement, repayments: Repayment[]): Step[] {
  const steps: Step[] = [
    { at: d.createdAt, what: `Offered: ${naira(d.principalKobo)}, mandate sent to the person` },
  ];
  const accepted = d.acceptance?.acceptedAt || d.scheduleAcceptedAt;
  if (accepted) steps.push({ at: accepted, what: "Mandate accepted by the person" });
  if (d.deliveredAt) steps.push({ at: d.deliveredAt, what: `Paid out: ${naira(d.principalKobo)}` });
  if (d.failedAt) steps.push({ at: d.failedAt, what: `Payout failed: ${d.failureReason}`, bad: true });
  if (d.reversedAt) steps.push({ at: d.reversedAt, what: "Payout reversed by the bank", bad: true });
  if (d.cancelledAt)
    steps.push({
      at: d.cancelledAt,
      what: `Cancelled${d.failureReason ? `: ${d.failureReason}` : ""}`,
      bad: true,
    });
  for (const r of repayments) {
    if (r.collectedAt)
      steps.push({ at: r.collectedAt, what: `Installment ${r.seq} collected: ${naira(r.amountKobo)}` });
    else if (r.lastFailure)
      steps.push({
        at: r.nextAttemptAt || r.dueDate,
        what: `Installment ${r.seq}: ${r.lastFailure}`,
        bad: true,
      });
    if (r.refund?.refundedAt)
      steps.push({
        at: r.refund.refundedAt,
        what: `Installment ${r.seq} refunded: ${naira(r.refund.amountKobo)}`,
      });
  }
  return steps.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

/** One disbursement (`/disbursements/dsb_…`): its terms, its timeline, its installments and the events it raised. */
export function DisbursementPage({ id }: { id: string }) {
  const d = useQuery(DisbursementService.method.getDisbursement, { id });
  const repayments = useQuery(DisbursementService.method.listRepayments, { disbursementId: id });
  const disbursement = d.data?.disbursement;
  return (
    <Page title="Disbursement" id={id} crumbs={[{ label: "Disbursements", path: "/disbursements" }]}>
      {d.isPending ? <Loading /> : null}
      {/* The disbursement's own error alone: its installments' would say the same. */}
      <ErrorBox error={d.error ?? (disbursement ? repayments.error : undefined)} />
      {disbursement ? (
        <>
          <Terms d={disbursement} />
          <SandboxActions id={id} title="Act in the sandbox" actions={sandboxActions(disbursement)} />
          {repayments.data ? (
            <>
              <h2>Timeline</h2>
              <ol class="timeline">
                {timeline(disbursement, repayments.data.repayments).map((s) => (
                  <li key={`${s.at}.${s.what}`} class={s.bad ? "bad" : ""}>
                    <Time at={s.at} />: {s.what}
                  </li>
                ))}
              </ol>
            </>
          ) : null}
          <h2>Installments</h2>
          <ListTable
            label="Installments"
            columns={INSTALLMENT_COLUMNS}
            rows={repayments.data?.repayments}
            rowKey={(r) => r.id}
            empty="No installments: the schedule is made when the person accepts the mandate."
          />
          <h2>Events</h2>
          <EventsAbout objectId={id} empty="No events about this disbursement were sent to a webhook." />
        </>
      ) : null}
    </Page>
  );
}

/** What the sandbox can do to a disbursement in its state: answer its mandate as the person, or settle its payout. */
function sandboxActions(d: Disbursement) {
  switch (enumName(Disbursement_StatusSchema, d.status)) {
    case "AWAITING_ACCEPTANCE":
      return [
        { name: "Accept the mandate as the person", method: SandboxService.method.acceptDisbursement },
        { name: "Decline it as the person", method: SandboxService.method.declineDisbursement },
      ];
    case "PENDING":
    case "PROCESSING":
      return [{ name: "Fail the payout", method: SandboxService.method.failDisbursement }];
    case "DELIVERED":
      return [{ name: "Reverse the payout", method: SandboxService.method.reverseDisbursement }];
    default:
      return [];
  }
}

const INSTALLMENT_COLUMNS = [
  { head: "#", cell: (r: Repayment) => r.seq },
  { head: "Due", cell: (r: Repayment) => r.dueDate },
  { head: "Amount", cell: (r: Repayment) => naira(r.amountKobo) },
  {
    head: "Status",
    cell: (r: Repayment) => <StatusBadge status={enumName(Repayment_StatusSchema, r.status)} />,
  },
  { head: "Attempts", cell: (r: Repayment) => r.attempts },
  {
    head: "Refund",
    cell: (r: Repayment) =>
      r.refund
        ? `${enumName(Repayment_Refund_StatusSchema, r.refund.status)} ${naira(r.refund.amountKobo)}`
        : "",
  },
  { head: "Id", cell: (r: Repayment) => <IdLink id={r.id} /> },
];

function Terms({ d }: { d: Disbursement }) {
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge status={enumName(Disbursement_StatusSchema, d.status)} />
        {d.failureReason ? ` (${d.failureReason})` : ""}
      </dd>
      <dt>User</dt>
      <dd>
        <IdLink id={d.userId} />
      </dd>
      <dt>Principal</dt>
      <dd>
        {naira(d.principalKobo)} to the{" "}
        {enumName(Disbursement_DestinationSchema, d.destination).toLowerCase()}
      </dd>
      <dt>Fee</dt>
      <dd>
        {naira(d.feeKobo)} ({d.feeRateBps / 100} %)
      </dd>
      <dt>Repayable</dt>
      <dd>{naira(d.totalRepayableKobo)}</dd>
      <dt>Reference</dt>
      <dd>
        <code>{d.reference}</code>
      </dd>
      {d.acceptanceUrl && !d.scheduleAcceptedAt ? (
        <>
          <dt>Mandate page</dt>
          <dd>
            <code>{d.acceptanceUrl}</code>, until <Time at={d.acceptanceExpiresAt} />
          </dd>
        </>
      ) : null}
    </dl>
  );
}
