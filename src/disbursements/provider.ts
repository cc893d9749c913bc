import type { Em } from "../platform/db/orm.ts";
import { refundRepository } from "./refund.repository.ts";
import { sandboxSimulatorRepository as simulator } from "./sandbox-simulator.repository.ts";

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

/**
 * The provider's answer about a transfer. `PENDING`: accepted and not settled yet (a webhook or a later
 * question settles it). `REVERSED`: it went out and came back.
 */
export type TransferOutcome =
  | { status: "SUCCESS" }
  | { status: "PENDING" }
  | { status: "FAILED"; reason: string }
  | { status: "REVERSED"; reason: string };

/** The provider's answer about a direct debit. */
export type DebitOutcome =
  | { status: "SUCCESS" }
  | { status: "PENDING" }
  | { status: "FAILED"; reason: string };

/** What a direct debit asks of the provider. */
export interface DebitRequest {
  /** `rpy_…:<attempt>`: the provider's idempotent reference for this attempt. */
  reference: string;
  /** The disbursement's partner reference. */
  partnerReference: string;
  amountKobo: bigint;
  userId: string;
}

/** What a refund of a collected repayment asks of the provider. */
export interface RefundRequest {
  /** Our refund reference (`rfd_…`), shown on the provider's record. */
  reference: string;
  /**
   * The provider reference of the charge that collected the repayment (`rpy_…:<attempt>`): the refund is made
   * against it, and a provider refunds a charge at most once over (never more than it collected).
   */
  chargeReference: string;
  amountKobo: bigint;
  userId: string;
}

/** The provider's answer about a refund. `PENDING`: accepted, not yet settled with the user's bank. */
export type RefundOutcome =
  | { status: "SUCCESS" }
  | { status: "PENDING" }
  | { status: "FAILED"; reason: string };

/** How a call is made. */
export interface CallOptions {
  /**
   * This reference may have reached the provider already (a retried job, a crashed worker, a pending answer):
   * ask about it before sending anything.
   */
  resumed: boolean;
}

/**
 * A payment provider behind one interface: the sandbox simulator, or the HTTP adapter in production. Every
 * call is idempotent by our reference: calling again returns the first outcome and never moves money twice.
 * A call that cannot tell what happened (time-out, network, provider error) throws, and is asked again.
 */
export interface PaymentProvider {
  readonly name: string;
  /** The one environment this provider serves: a sandbox key never reaches a real provider, nor a live key the simulator. */
  readonly environment: "sandbox" | "production";
  /** Whether payouts and debits need the user's payment instruments on file (the simulator needs none). */
  readonly needsInstruments: boolean;
  /** Sends the transfer, or returns the outcome of the one already sent under this reference. */
  transfer(em: Em, request: TransferRequest, options: CallOptions): Promise<TransferOutcome>;
  /** Charges the user's stored debit authorisation, or returns the outcome of the charge already made under this reference. */
  debit(em: Em, request: DebitRequest, options: CallOptions): Promise<DebitOutcome>;
  /**
   * Refunds a collected repayment against the charge that collected it, or returns the outcome of the refund
   * already made against that charge. Throws when the provider holds another amount than asked.
   */
  refund(em: Em, request: RefundRequest, options: CallOptions): Promise<RefundOutcome>;
}

/** Sandbox disbursements whose partner reference ends in this have every repayment debit fail. */
export const SANDBOX_DEBIT_FAIL_SUFFIX = "_debit_fail";

/** Sandbox disbursements whose partner reference ends in this fail, so partners can test the failure path. */
export const SANDBOX_FAIL_SUFFIX = "_fail";

/** Sandbox disbursements whose partner reference ends in this stay PROCESSING until a sandbox helper settles them. */
export const SANDBOX_PENDING_SUFFIX = "_pending";

type SimulatedStatus = "SUCCESS" | "FAILED" | "PENDING" | "REVERSED";

/** The simulator's first answer for a transfer, chosen by the partner's reference. */
function simulatedTransfer(partnerReference: string): { status: SimulatedStatus; reason: string | null } {
  if (partnerReference.endsWith(SANDBOX_PENDING_SUFFIX)) return { status: "PENDING", reason: null };
  if (partnerReference.endsWith(SANDBOX_FAIL_SUFFIX) && !partnerReference.endsWith(SANDBOX_DEBIT_FAIL_SUFFIX))
    return { status: "FAILED", reason: "destination_unavailable" };
  return { status: "SUCCESS", reason: null };
}

/**
 * The sandbox simulator: deterministic outcomes chosen by the request (a partner reference ending in `_fail`
 * fails with `destination_unavailable`, one ending in `_pending` stays pending, one ending in `_debit_fail`
 * pays out and has every debit fail with `insufficient_funds`), recorded by reference so a repeated call
 * returns the first outcome. A refund is recorded once per charge, and succeeds for a charge it collected.
 * The sandbox helpers change a recorded outcome, as the provider would, and then settle it through the same
 * path as a provider webhook.
 */
export const sandboxProvider: PaymentProvider = {
  name: "sandbox",
  environment: "sandbox",
  needsInstruments: false,
  async transfer(em, request) {
    const row = await simulator.transfer(
      em,
      request.reference,
      request.amountKobo,
      simulatedTransfer(request.partnerReference),
    );
    switch (row?.status) {
      case "SUCCESS":
        return { status: "SUCCESS" };
      case "PENDING":
        return { status: "PENDING" };
      case "REVERSED":
        return { status: "REVERSED", reason: row.failure_reason ?? "transfer_reversed" };
      default:
        return { status: "FAILED", reason: row?.failure_reason ?? "failed" };
    }
  },
  async debit(em, request) {
    const fails = request.partnerReference.endsWith(SANDBOX_DEBIT_FAIL_SUFFIX);
    const row = await simulator.debit(
      em,
      request.reference,
      request.amountKobo,
      fails ? { status: "FAILED", reason: "insufficient_funds" } : { status: "SUCCESS", reason: null },
    );
    return row?.status === "SUCCESS"
      ? { status: "SUCCESS" }
      : { status: "FAILED", reason: row?.failure_reason ?? "failed" };
  },
  async refund(em, request) {
    const row = await refundRepository.simulatedRefund(
      em,
      request.reference,
      request.chargeReference,
      request.amountKobo,
    );
    // As the HTTP adapter: another amount than asked is never settled, as more or as less.
    if (row && BigInt(row.amount_kobo) !== request.amountKobo)
      throw new Error(`simulated refund amount for ${request.chargeReference} differs from ours`);
    return row?.status === "SUCCESS"
      ? { status: "SUCCESS" }
      : { status: "FAILED", reason: row?.failure_reason ?? "failed" };
  },
};
