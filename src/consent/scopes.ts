/** The consent scopes of CONTRACT.md §3, in the order snapshots present them. */
export const scopes = [
  "standing",
  "signals.standing",
  "signals.work",
  "signals.cashflow",
  "ledger",
  "kyc",
  "repayment_history",
] as const;

/** A consent scope. */
export type Scope = (typeof scopes)[number];

/** True when `value` is a scope. */
export function isScope(value: string): value is Scope {
  return (scopes as readonly string[]).includes(value);
}

/** Each scope in plain words, as the consent page shows it to the person. */
export function describeScope(scope: Scope, windowDays: number): string {
  switch (scope) {
    case "standing":
      return "Your standing tier and score on the platform.";
    case "signals.standing":
      return "How steady your standing has been over time.";
    case "signals.work":
      return "Signals about your work: how regularly you earn and how long you have been active.";
    case "signals.cashflow":
      return "Cashflow signals worked out from your transactions, such as how steady your income is.";
    case "ledger":
      return `Totals and counts of the money that came in and went out over up to the last ${windowDays} days. Never single transactions, and never who you paid or who paid you.`;
    case "kyc":
      return "Whether your identity has been verified. Never your BVN, NIN, account numbers or documents.";
    case "repayment_history":
      return "How you have repaid loans taken through the platform, added up across lenders. No lender is named.";
  }
}
