/**
 * The hosted decision pages, as other features use them: the contract a page's flow fills in (its view,
 * terms and words), the decision flow its service builds on (open by token, prove the person, decide once),
 * the HTML escaping its terms use, and the HTTP side the composition serves.
 */
export {
  createDecisionFlow,
  type DecisionEvidence,
  type DecisionFlow,
  type DecisionFlowDeps,
  type DecisionSubject,
} from "./decision-flow.ts";
export type { HostedFlow, HostedOutcome, HostedView, Note, PageProof } from "./hosted-flow.ts";
export { createHostedPages, type HostedPages, type HostedPagesOptions } from "./hosted-page.ts";
export { escapeHtml } from "./page-html.ts";
