import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";

/** What a payout asks of a payment provider. */
export interface TransferRequest {
  /** Our disbursement id: the provider's idempotent reference, so asking twice never pays twice. */
  reference: string;
  /** The partner's own reference for the loan, shown on statements. */
  partnerReference: string;
  amountKobo: bigint;
  destination: "WALLET" | "BANK";
  userId: string;
}

/** The provider's answer. */
export type TransferOutcome = { status: "SUCCESS" } | { status: "FAILED"; reason: string };

/** What a direct debit asks of the provider. */
export interface DebitRequest {
  /** `rpy_…:<attempt>`: the provider's idempotent reference for this attempt. */
  reference: string;
  /** The disbursement's partner reference. */
  partnerReference: string;
  amountKobo: bigint;
  userId: string;
}

/** A payment provider behind one interface: the sandbox simulator, or an HTTP adapter in production. */
export interface PaymentProvider {
  readonly name: string;
  /** Sends the transfer, or returns the earlier outcome for the same reference. */
  transfer(em: Em, request: TransferRequest): Promise<TransferOutcome>;
  /** Charges the user's stored debit authorisation, or returns the earlier outcome for the same reference. */
  debit(em: Em, request: DebitRequest): Promise<TransferOutcome>;
}

/** Sandbox disbursements whose partner reference ends in this have every repayment debit fail. */
export const SANDBOX_DEBIT_FAIL_SUFFIX = "_debit_fail";

/** Sandbox disbursements whose partner reference ends in this fail, so partners can test the failure path. */
export const SANDBOX_FAIL_SUFFIX = "_fail";

/**
 * The sandbox simulator: deterministic outcomes chosen by the request (a partner reference ending in `_fail` fails
 * with `destination_unavailable`), recorded by reference so a repeated call returns the first outcome.
 */
export const sandboxProvider: PaymentProvider = {
  name: "sandbox",
  async transfer(em, request) {
    const fails =
      request.partnerReference.endsWith(SANDBOX_FAIL_SUFFIX) &&
      !request.partnerReference.endsWith(SANDBOX_DEBIT_FAIL_SUFFIX);
    await sql(
      em,
      `insert into sandbox_transfers (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now()) on conflict (reference) do nothing`,
      [
        request.reference,
        request.amountKobo.toString(),
        fails ? "FAILED" : "SUCCESS",
        fails ? "destination_unavailable" : null,
      ],
    );
    const [row] = await sql<{ status: "SUCCESS" | "FAILED"; failure_reason: string | null }>(
      em,
      "select status, failure_reason from sandbox_transfers where reference = $1",
      [request.reference],
    );
    return row?.status === "SUCCESS"
      ? { status: "SUCCESS" }
      : { status: "FAILED", reason: row?.failure_reason ?? "failed" };
  },
  async debit(em, request) {
    const fails = request.partnerReference.endsWith(SANDBOX_DEBIT_FAIL_SUFFIX);
    await sql(
      em,
      `insert into sandbox_debits (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now()) on conflict (reference) do nothing`,
      [
        request.reference,
        request.amountKobo.toString(),
        fails ? "FAILED" : "SUCCESS",
        fails ? "insufficient_funds" : null,
      ],
    );
    const [row] = await sql<{ status: "SUCCESS" | "FAILED"; failure_reason: string | null }>(
      em,
      "select status, failure_reason from sandbox_debits where reference = $1",
      [request.reference],
    );
    return row?.status === "SUCCESS"
      ? { status: "SUCCESS" }
      : { status: "FAILED", reason: row?.failure_reason ?? "failed" };
  },
};
