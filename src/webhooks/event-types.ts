/**
 * The six event types (CONTRACT.md §5), spelled exactly as on the wire, and the rules of subscription
 * filters: an exact type, `*`, or a prefix wildcard (`consent.*`, `REPAYMENT_*`) that matches a type.
 */
export const eventTypes = [
  "consent.granted",
  "consent.revoked",
  "standing.tier_changed",
  "DISBURSEMENT_DELIVERED",
  "REPAYMENT_COLLECTED",
  "REPAYMENT_FAILED",
] as const;

/** An event type. */
export type EventType = (typeof eventTypes)[number];

/** True when `value` is one of the six types. */
export function isEventType(value: string): value is EventType {
  return (eventTypes as readonly string[]).includes(value);
}

/** True when a filter is well formed and can match at least one type. */
export function isValidFilter(filter: string): boolean {
  if (filter === "*") return true;
  if (filter.endsWith("*")) {
    const prefix = filter.slice(0, -1);
    if (!/[._]$/.test(prefix) || prefix.includes("*")) return false;
    return eventTypes.some((t) => t.startsWith(prefix));
  }
  return isEventType(filter);
}

/** True when the filter selects the type. */
export function filterMatches(filter: string, type: string): boolean {
  if (filter === "*") return true;
  if (filter.endsWith("*")) return type.startsWith(filter.slice(0, -1));
  return filter === type;
}

/** True when any of the filters selects the type. */
export function subscribed(filters: readonly string[], type: string): boolean {
  return filters.some((f) => filterMatches(f, type));
}

/** Example payloads for test sends, in the shape each real event carries. */
export const samplePayloads: Record<EventType, Record<string, unknown>> = {
  "consent.granted": {
    consentId: "cns_00000000000000000000000000",
    userId: "usr_00000000000000000000000000",
    scopes: ["standing", "signals.cashflow"],
    source: "CONSENT_LINK",
    grantedAt: "2026-01-01T00:00:00Z",
  },
  "consent.revoked": {
    consentId: "cns_00000000000000000000000000",
    userId: "usr_00000000000000000000000000",
    revokedBy: "USER",
    revokedAt: "2026-01-01T00:00:00Z",
  },
  "standing.tier_changed": {
    userId: "usr_00000000000000000000000000",
    previousTier: "Established",
    tier: "Trusted",
    direction: "UP",
    score: 812,
    changedAt: "2026-01-01T00:00:00Z",
  },
  DISBURSEMENT_DELIVERED: {
    disbursementId: "dsb_00000000000000000000000000",
    userId: "usr_00000000000000000000000000",
    principalKobo: "5000000",
    feeKobo: "75000",
    destination: "WALLET",
    reference: "loan-0001",
    deliveredAt: "2026-01-01T00:00:00Z",
  },
  REPAYMENT_COLLECTED: {
    repaymentId: "rpy_00000000000000000000000000",
    disbursementId: "dsb_00000000000000000000000000",
    userId: "usr_00000000000000000000000000",
    amountKobo: "1250000",
    dueDate: "2026-02-01",
    collectedAt: "2026-02-01T09:00:00Z",
  },
  REPAYMENT_FAILED: {
    repaymentId: "rpy_00000000000000000000000000",
    disbursementId: "dsb_00000000000000000000000000",
    userId: "usr_00000000000000000000000000",
    amountKobo: "1250000",
    dueDate: "2026-02-01",
    failureCode: "insufficient_funds",
    attempt: 1,
    willRetry: true,
    failedAt: "2026-02-01T09:00:00Z",
  },
};
