import { consentRefusal, type Scope } from "../consent/consent.service.ts";
import { utcDay } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { signEd25519 } from "../platform/crypto/ed25519.ts";
import type { Em, Reader } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Caller } from "../platform/tenancy.ts";
import { canonicalJson } from "../sdk/canonical-json.ts";
import type { SigningKeyService } from "../signing/signing-key.service.ts";
import { CASHFLOW_DAYS, readSnapshotRow, type SnapshotData } from "./snapshot.repository.ts";
import {
  kycGroup,
  ledgerWindowGroup,
  repaymentHistoryGroup,
  signalsGroup,
  standingGroup,
} from "./snapshot-document.ts";

export { CASHFLOW_DAYS };

/** CONTRACT.md §3: 1 to 365 days. */
export const MAX_WINDOW_DAYS = 365;

/** What {@link createSnapshotService} is built from. */
export interface SnapshotServiceOptions {
  clock: Clock;
  signingKeys: SigningKeyService;
}

/** What {@link createSnapshotService} returns. */
export type SnapshotService = ReturnType<typeof createSnapshotService>;

/** The row and consent a snapshot is read under, or the refusal the read gets; the window it covers. */
function consentAndWindow(
  row: SnapshotData,
  requestedDays: number | undefined,
  now: Date,
): { data: SnapshotData; consent: NonNullable<SnapshotData["consent"]>; days: number } {
  const consent = row?.consent;
  const refusal = consentRefusal(
    row?.segment === null || !consent ? undefined : { status: consent.status, expiresAt: consent.expires_at },
    now,
  );
  if (refusal || !row || !consent) {
    throw new ApiError(
      refusal ?? "consent_required",
      undefined,
      consent ? { details: { consentId: consent.id } } : {},
    );
  }
  const days = requestedDays ?? consent.ledger_window_days;
  if (days > consent.max_ledger_window_days) {
    throw new ApiError("ledger_window_exceeds_consent", undefined, {
      details: { maxLedgerWindowDays: consent.max_ledger_window_days },
    });
  }
  return { data: row, consent, days };
}

/** The signed snapshot document, as the exact JSON text every face returns. */
async function readSnapshot(
  { clock, signingKeys }: SnapshotServiceOptions,
  em: Em,
  reader: Reader,
  caller: Caller,
  userId: string,
  requestedDays: number | undefined,
): Promise<string> {
  if (
    requestedDays !== undefined &&
    (!Number.isInteger(requestedDays) || requestedDays < 1 || requestedDays > MAX_WINDOW_DAYS)
  ) {
    throw new ApiError("invalid_ledger_window");
  }
  const now = clock.now();
  const today = utcDay(now);
  // The consent and the data in one statement, on a replica when there is one: it has applied everything the
  // primary had committed when the read began, a revocation included (platform/db/replicas.ts).
  const row = await reader((r, after) => readSnapshotRow(r, caller, userId, requestedDays, today, after));
  const { data, consent, days } = consentAndWindow(row, requestedDays, now);
  const has = (s: Scope) => consent.scopes.includes(s);
  // The groups in the contract's order: the document is returned as built, and signed as canonical JSON.
  const doc: Record<string, unknown> = {
    snapshotId: newId("snp"),
    userId,
    environment: caller.environment,
    consentId: consent.id,
    generatedAt: now.toISOString(),
    standing: standingGroup(data, has),
  };
  doc.signals = signalsGroup(data, has);
  if (has("ledger")) doc.ledgerWindow = ledgerWindowGroup(data, days, today);
  if (has("kyc")) doc.kyc = kycGroup(data);
  // Across every lender, naming none; absent when the user never borrowed (CONTRACT.md §3).
  if (has("repayment_history") && data.history.loans_taken > 0)
    doc.repaymentHistory = repaymentHistoryGroup(data);
  const signer = await signingKeys.signer(em, caller.environment);
  const value = signEd25519(signer.key, Buffer.from(canonicalJson(doc))).toString("base64url");
  doc.signature = { alg: "Ed25519", kid: signer.kid, value };
  return JSON.stringify(doc);
}

/**
 * Snapshots (CONTRACT.md §3): the consent check and the assembly in one query, the scope rule (a field out
 * of scope is null, a group out of scope is absent), and an Ed25519 signature over the canonical JSON. Nothing
 * is cached: every read sees the consent as it is now and gets its own id, time and signature.
 */
export function createSnapshotService(o: SnapshotServiceOptions) {
  return {
    /**
     * The signed snapshot document, as the exact JSON text every face returns: read through `reader`, signed
     * with `em` (the primary's, where signing keys are made).
     */
    read: (
      em: Em,
      reader: Reader,
      caller: Caller,
      userId: string,
      requestedDays: number | undefined,
    ): Promise<string> => readSnapshot(o, em, reader, caller, userId, requestedDays),
  };
}
