import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { DisbursementService } from "./disbursement.service.ts";
import type { PaystackProvider } from "./paystack.ts";
import { providerReference } from "./paystack.ts";
import type { RefundService } from "./refund.service.ts";
import type { RepaymentService } from "./repayment.service.ts";

/** The path the payment provider posts its webhooks to, on the partner listener. */
export const PAYSTACK_WEBHOOK_PATH = "/providers/paystack/webhook";

/** What became of one provider webhook. */
export type ProviderWebhookResult =
  | { status: "bad_signature" }
  | { status: "malformed" }
  | { status: "ignored" }
  | { status: "settled"; reference: string; outcome: string };

/** What {@link createProviderWebhooks} returns. */
export type ProviderWebhooks = ReturnType<typeof createProviderWebhooks>;

/**
 * The provider's webhooks (`transfer.success`, `transfer.failed`, `transfer.reversed`, `charge.success`,
 * `refund.processed`, …):
 * verified by their HMAC-SHA512 signature, then reconciled by our reference. The body only says which
 * reference to look at: the outcome recorded is the one the provider answers when asked about that
 * reference, so a replayed, stale or out-of-order webhook can do no harm. Settling is guarded by status, so
 * the same webhook twice changes nothing.
 */
export function createProviderWebhooks(o: {
  paystack: PaystackProvider | undefined;
  disbursements: DisbursementService;
  repayments: RepaymentService;
  refunds: RefundService;
  logger: Logger;
}) {
  return {
    /** True when a provider is configured to receive webhooks from. */
    enabled: () => o.paystack !== undefined,

    /** Handles one webhook body. Throws when the outcome could not be learnt or recorded (answer 5xx: the provider retries). */
    async receive(em: Em, body: Buffer, signature: string | undefined): Promise<ProviderWebhookResult> {
      const paystack = o.paystack;
      if (!paystack?.verifySignature(body, signature)) return { status: "bad_signature" };
      let event: { event?: unknown; data?: { reference?: unknown; transaction_reference?: unknown } };
      try {
        event = JSON.parse(body.toString("utf8"));
      } catch {
        return { status: "malformed" };
      }
      const kind = typeof event?.event === "string" ? event.event : "";
      const reference = typeof event?.data?.reference === "string" ? event.data.reference : "";
      if (kind.startsWith("transfer.") && providerReference.isTransfer(reference)) {
        // Only production disbursements are paid through this provider.
        const disbursement = await o.disbursements.byId(em, "production", reference);
        if (!disbursement) return { status: "ignored" };
        const outcome = await paystack.lookupTransfer(reference, disbursement.principalKobo);
        if (!outcome) return { status: "ignored" };
        // A reversal owes back what was collected, and queues its refunds, in its own transaction.
        const status = await o.disbursements.settlePayout(em, reference, outcome);
        return { status: "settled", reference, outcome: status };
      }
      if (kind.startsWith("charge.") && providerReference.isDebit(reference)) {
        const pending = await o.repayments.pendingDebit(em, "production", reference);
        if (!pending) return { status: "ignored" };
        const outcome = await paystack.lookupDebit(reference, pending.amountKobo);
        if (!outcome) return { status: "ignored" };
        const status = await o.repayments.settleDebit(em, reference, outcome);
        return { status: "settled", reference, outcome: status };
      }
      // A refund's events name the charge it refunds.
      const charge =
        typeof event?.data?.transaction_reference === "string" ? event.data.transaction_reference : "";
      if (kind.startsWith("refund.") && providerReference.isDebit(charge)) {
        const owed = await o.refunds.pendingByCharge(em, "production", charge);
        if (!owed) return { status: "ignored" };
        const outcome = await paystack.lookupRefund(charge, owed.amountKobo);
        if (!outcome) return { status: "ignored" };
        const status = await o.refunds.settle(em, owed.installmentId, outcome);
        return { status: "settled", reference: charge, outcome: status };
      }
      o.logger.debug("provider webhook ignored", { event: kind.slice(0, 64) });
      return { status: "ignored" };
    },
  };
}
