import { escapeHtml, type HostedFlow, type HostedView } from "../person/hosted-pages.service.ts";
import type { ConsentLinkService, PageView } from "./consent-link.service.ts";
import { describeScope, isScope } from "./scopes.ts";

/** What the consent page shows: the link and its partner, in the hosted pages' shape. */
export type ConsentPageView = PageView & HostedView;

/**
 * The terms as the page shows them. Deterministic from the link, so the text hashed into the consent's
 * evidence is exactly what the person saw.
 */
export function termsBlock(view: PageView): string {
  const { link, partnerName } = view;
  const name = escapeHtml(partnerName);
  const items = link.scopes
    .filter(isScope)
    .map((s) => `<li>${escapeHtml(describeScope(s, link.maxLedgerWindowDays))}</li>`)
    .join("\n");
  return `<h1>${name} asks to see some of your information</h1>
<p>${name} will use it to decide on a loan for you. You can withdraw this permission at any time in your app.</p>
<h2>What ${name} will see</h2>
<ul>
${items}
</ul>
<h2>For how long</h2>
<p>Figures cover up to the last ${link.maxLedgerWindowDays} days (usually ${link.ledgerWindowDays}). Your permission lasts one year unless you withdraw it sooner.</p>
<p class="muted">${name} never sees your individual transactions, who you pay or who pays you, your account numbers, BVN, NIN, location or messages. This link ends in ${escapeHtml(link.phoneLast4)} and expires ${escapeHtml(link.expiresAt.toUTCString())}.</p>`;
}

/**
 * The hosted consent page (`/consent/{token}`, CONTRACT.md §4): the partner's name, each scope in plain words
 * and the window; the person proves who they are, then allows or declines.
 */
export function consentFlow(links: ConsentLinkService): HostedFlow<ConsentPageView> {
  return {
    name: "consent",
    goneCode: "consent_link_gone",
    async page(em, token) {
      const view = await links.page(em, token);
      return {
        ...view,
        status: view.link.status,
        phoneLast4: view.link.phoneLast4,
        url: view.link.url,
        redirectUrl: view.link.redirectUrl ?? null,
      };
    },
    sendCode: (em, token) => links.sendCode(em, token),
    decide: (em, token, accept, proof) => links.decide(em, token, accept, proof),
    sessionFits: (em, token, sessionId) => links.sessionFits(em, token, sessionId),
    decideWithSession: (em, token, accept, sessionId, proof) =>
      links.decideWithSession(em, token, accept, sessionId, proof),
    title: (view) => `${view.partnerName} asks to see your information`,
    terms: termsBlock,
    acceptLabel: (view) => `Allow ${view.partnerName} to see this`,
    declineLabel: () => "Don't allow",
    gone(view) {
      switch (view.status) {
        case "ACCEPTED":
          return {
            title: "This link has already been used",
            text: "You already allowed this. Nothing more to do here.",
          };
        case "DECLINED":
          return {
            title: "This link has already been used",
            text: "You chose not to allow this. The link cannot be used again.",
          };
        case "LOCKED":
          return {
            title: "This link is locked",
            text: "Too many wrong codes were entered. For your safety it cannot be used again: ask the lender for a new link.",
          };
        default:
          return { title: "This link has expired", text: "Ask the lender to send you a new link." };
      }
    },
    done: (outcome) =>
      outcome === "accepted"
        ? {
            title: "Thank you",
            text: "You allowed the lender to see the information listed. You can withdraw this at any time in your app.",
          }
        : { title: "Done", text: "You chose not to allow this. The lender will not see your information." },
    redirectParams: (view) => ({ consent_link_id: view.link.id }),
  };
}
