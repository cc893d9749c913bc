import { escapeHtml, type HostedFlow, type HostedView, type Note } from "../person/hosted-pages.service.ts";
import type { MandateService, MandateView } from "./mandate.service.ts";

/** What the mandate page shows, in the hosted pages' shape. */
export type MandatePageView = MandateView & HostedView;

/** Kobo as naira for people: `₦1,234,567.89`. Integers only: money never passes through floating point. */
export function naira(kobo: bigint): string {
  const sign = kobo < 0n ? "-" : "";
  const abs = kobo < 0n ? -kobo : kobo;
  const whole = (abs / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}₦${whole}.${(abs % 100n).toString().padStart(2, "0")}`;
}

const dayFormat = new Intl.DateTimeFormat("en-GB", {
  weekday: "short",
  day: "numeric",
  month: "short",
  year: "numeric",
  timeZone: "UTC",
});

/** `YYYY-MM-DD` as people read it: `Wed 23 Dec 2026`. */
const humanDay = (day: string) => dayFormat.format(new Date(`${day}T00:00:00Z`));

/**
 * The terms as the mandate page shows them: the partner, the principal, where it goes, every installment and
 * the total repayable. Deterministic from the disbursement, so the text hashed into the acceptance is exactly
 * what the person saw.
 */
export function mandateTerms(view: MandateView): string {
  const { disbursement: d, installments, partnerName } = view;
  const name = escapeHtml(partnerName);
  const rows = installments
    .map(
      (i) =>
        `<tr><td>${escapeHtml(humanDay(i.dueDate))}</td><td class="amount">${escapeHtml(naira(i.amountKobo))}</td></tr>`,
    )
    .join("\n");
  const cost = view.totalKobo - d.principalKobo;
  const where = d.destination === "BANK" ? "your bank account" : "your wallet";
  return `<h1>${name} offers you a loan of ${escapeHtml(naira(d.principalKobo))}</h1>
<p>If you accept, ${escapeHtml(naira(d.principalKobo))} is paid into ${where}, and you agree that each repayment below is taken by direct debit from the account on file with your app, on its date.</p>
<h2>Your repayments</h2>
<table>
<thead><tr><th scope="col">Date</th><th scope="col" class="amount">Amount</th></tr></thead>
<tbody>
${rows}
</tbody>
<tfoot><tr><th scope="row">Total to repay</th><td class="amount">${escapeHtml(naira(view.totalKobo))}</td></tr></tfoot>
</table>
<p>The loan costs you ${escapeHtml(naira(cost))} in all (the total to repay less the ${escapeHtml(naira(d.principalKobo))} you receive). Nothing is ever taken above these amounts or on other dates.</p>
<p class="muted">Offer reference ${escapeHtml(d.reference)}. This offer expires ${escapeHtml(d.acceptanceExpiresAt?.toUTCString() ?? "")}.</p>`;
}

/** What a mandate that can no longer be answered says. */
function gone(view: MandateView): Note {
  if (view.status !== "CANCELLED")
    return { title: "You have already accepted this offer", text: "Nothing more to do here." };
  switch (view.reason) {
    case "mandate_declined":
      return { title: "You declined this offer", text: "Nothing was paid and nothing will be taken." };
    case "mandate_locked":
      return {
        title: "This offer is locked",
        text: "Too many wrong codes were entered. For your safety it cannot be used again: ask the lender for a new offer.",
      };
    case "schedule_lapsed":
      return {
        title: "This offer has lapsed",
        text: "Its first repayment date has passed. Nothing was paid; ask the lender for a new offer.",
      };
    default:
      return { title: "This offer has expired", text: "Nothing was paid. Ask the lender for a new offer." };
  }
}

/**
 * The hosted mandate page (`/mandate/{token}`, CONTRACT.md §6): the person proves who they are, sees the
 * loan and every repayment, and accepts or declines. Only an acceptance starts the payout.
 */
export function mandateFlow(mandates: MandateService): HostedFlow<MandatePageView> {
  return {
    name: "mandate",
    goneCode: "mandate_gone",
    page: (em, token) => mandates.page(em, token),
    sendCode: (em, token) => mandates.sendCode(em, token),
    decide: (em, token, accept, proof) => mandates.decide(em, token, accept, proof),
    sessionFits: (em, token, sessionId) => mandates.sessionFits(em, token, sessionId),
    decideWithSession: (em, token, accept, sessionId, proof) =>
      mandates.decideWithSession(em, token, accept, sessionId, proof),
    title: (view) => `${view.partnerName} offers you a loan`,
    terms: mandateTerms,
    acceptLabel: () => "Accept the loan and repayments",
    declineLabel: () => "Decline",
    gone,
    done: (outcome) =>
      outcome === "accepted"
        ? {
            title: "Thank you",
            text: "You accepted the loan. The money is on its way; repayments are taken only on the dates and amounts you saw.",
          }
        : { title: "Done", text: "You declined the offer. Nothing is paid and nothing will be taken." },
    redirectParams: (view) => ({ disbursement_id: view.disbursement.id }),
  };
}
