import { createHmac, timingSafeEqual } from "node:crypto";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { PaymentInstrumentStore } from "../users/payment-instruments.ts";
import type {
  CallOptions,
  DebitOutcome,
  DebitRequest,
  PaymentProvider,
  RefundOutcome,
  RefundRequest,
  TransferOutcome,
  TransferRequest,
} from "./provider.ts";

/** Where the provider is and how we authenticate to it (PAYMENT_PROVIDER_URL, PAYMENT_PROVIDER_SECRET_KEY). */
export interface PaystackConfig {
  /** Base URL of the provider's API, such as `https://api.paystack.co`. */
  baseUrl: string;
  /** The secret key: the bearer credential of every call, and the key of its webhook signatures. */
  secretKey: string;
  /** Time allowed for one call. */
  timeoutMs: number;
}

/**
 * The provider could not say what happened (network, time-out, 5xx, throttling, our credentials refused).
 * The call is asked again later by the same reference; nothing is decided on it.
 */
export class ProviderUnavailableError extends Error {
  override readonly name = "ProviderUnavailableError";
}

/** The provider's envelope: `{ status, message, data }`. */
interface Envelope<T> {
  status?: boolean;
  message?: string;
  data?: T;
}

interface TransferData {
  reference?: string;
  status?: string;
  amount?: number;
}

interface ChargeData {
  /** The provider's own id of the transaction, which its refunds name. */
  id?: number;
  reference?: string;
  status?: string;
  amount?: number;
  gateway_response?: string;
}

interface RefundData {
  status?: string;
  amount?: number;
  /** The refunded transaction: its id in lists, the transaction itself on create. */
  transaction?: number | { id?: number; reference?: string };
}

/** A Paystack-style provider adapter, with the lookups its webhook reconciliation needs. */
export interface PaystackProvider extends PaymentProvider {
  /** The provider's current answer about a transfer we sent, or undefined when it has none under this reference. */
  lookupTransfer(reference: string, amountKobo: bigint): Promise<TransferOutcome | undefined>;
  /** The provider's current answer about a charge we made, or undefined when it has none under this reference. */
  lookupDebit(reference: string, amountKobo: bigint): Promise<DebitOutcome | undefined>;
  /** The provider's current answer about the refund of a charge, or undefined when the charge has none. */
  lookupRefund(chargeReference: string, amountKobo: bigint): Promise<RefundOutcome | undefined>;
  /** True when `signature` is the hex HMAC-SHA512 of `body` under the secret key (constant-time). */
  verifySignature(body: Buffer, signature: string | undefined): boolean;
}

/** Maps the provider's transfer status to ours. Anything it might still settle is PENDING, never FAILED. */
function transferOutcome(data: TransferData | undefined): TransferOutcome {
  const status = data?.status ?? "";
  if (status === "success") return { status: "SUCCESS" };
  if (status === "failed" || status === "abandoned" || status === "rejected")
    return { status: "FAILED", reason: "transfer_failed" };
  if (status === "reversed") return { status: "REVERSED", reason: "transfer_reversed" };
  // pending, otp, received, queued, processing…: not settled yet.
  return { status: "PENDING" };
}

/** Maps the provider's charge status to ours; a failed charge's reason is a stable code, not the bank's words. */
function debitOutcome(data: ChargeData | undefined): DebitOutcome {
  const status = data?.status ?? "";
  if (status === "success") return { status: "SUCCESS" };
  if (status === "failed" || status === "abandoned" || status === "reversed") {
    const words = (data?.gateway_response ?? "").toLowerCase();
    return {
      status: "FAILED",
      reason: words.includes("insufficient") ? "insufficient_funds" : "debit_declined",
    };
  }
  // pending, ongoing, processing, send_otp…: not settled yet.
  return { status: "PENDING" };
}

/**
 * Maps the provider's refund status to ours: `processed` is the money back with the user; `failed` is a
 * refund the user's bank refused; anything else (pending, processing, needs-attention…) is not settled yet.
 */
function refundOutcome(data: RefundData | undefined): RefundOutcome {
  const status = data?.status ?? "";
  if (status === "processed") return { status: "SUCCESS" };
  if (status === "failed") return { status: "FAILED", reason: "refund_failed" };
  return { status: "PENDING" };
}

/**
 * The HTTP adapter for a Paystack-style provider. Transfers go from the balance to the user's bank or wallet
 * recipient with our disbursement id as the provider's `reference`; debits charge the user's stored
 * authorisation with `rpy_…:<attempt>` as the reference; refunds are made against that charge (`POST /refund`),
 * which the provider refunds at most once over. A call that may have reached the provider before
 * (`resumed`) first asks by reference; a refused create is also checked by reference (the provider refuses a
 * reference it has seen), so one reference is at most one movement of money.
 */
export function createPaystackProvider(o: {
  config: PaystackConfig;
  instruments: PaymentInstrumentStore;
  logger: Logger;
}): PaystackProvider {
  const base = o.config.baseUrl.replace(/\/+$/, "");

  /** One call. Answers the envelope and status for 2xx and 4xx; throws ProviderUnavailableError otherwise. */
  async function call<T>(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
  ): Promise<{ status: number; envelope: Envelope<T> }> {
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${o.config.secretKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: "error",
        signal: AbortSignal.timeout(o.config.timeoutMs),
      });
    } catch (err) {
      throw new ProviderUnavailableError(`${method} ${path}: ${(err as Error).name}`);
    }
    const text = await res.text().catch(() => "");
    // Credentials refused or throttled are ours or theirs to fix, not the payment's outcome.
    if (res.status >= 500 || res.status === 401 || res.status === 403 || res.status === 429) {
      throw new ProviderUnavailableError(`${method} ${path}: HTTP ${res.status}`);
    }
    let envelope: Envelope<T>;
    try {
      envelope = JSON.parse(text) as Envelope<T>;
    } catch {
      throw new ProviderUnavailableError(`${method} ${path}: HTTP ${res.status} without JSON`);
    }
    return { status: res.status, envelope };
  }

  /** Fails loudly when the provider holds another amount under our reference: that is never settled silently. */
  function checkAmount(reference: string, expected: bigint, actual: number | undefined): void {
    if (actual !== undefined && BigInt(actual) !== expected) {
      o.logger.error("payment provider amount differs from ours", { reference });
      throw new Error(`provider amount for ${reference} differs from ours`);
    }
  }

  const lookupTransfer = async (reference: string, amountKobo: bigint) => {
    const { status, envelope } = await call<TransferData>(
      "GET",
      `/transfer/verify/${encodeURIComponent(reference)}`,
    );
    if (status >= 400 || !envelope.status || !envelope.data) return undefined;
    checkAmount(reference, amountKobo, envelope.data.amount);
    return transferOutcome(envelope.data);
  };

  const lookupDebit = async (reference: string, amountKobo: bigint) => {
    const { status, envelope } = await call<ChargeData>(
      "GET",
      `/transaction/verify/${encodeURIComponent(reference)}`,
    );
    if (status >= 400 || !envelope.status || !envelope.data) return undefined;
    checkAmount(reference, amountKobo, envelope.data.amount);
    return debitOutcome(envelope.data);
  };

  /**
   * The refund of a charge: the charge's own id, then the provider's refunds of it. A processed one answers;
   * else one still under way; else (every one failed) the failure.
   */
  const lookupRefund = async (chargeReference: string, amountKobo: bigint) => {
    const charge = await call<ChargeData>(
      "GET",
      `/transaction/verify/${encodeURIComponent(chargeReference)}`,
    );
    const id = charge.envelope.data?.id;
    if (charge.status >= 400 || !charge.envelope.status || id === undefined) return undefined;
    const { status, envelope } = await call<RefundData[]>("GET", `/refund?transaction=${id}`);
    if (status >= 400 || !envelope.status || !Array.isArray(envelope.data)) return undefined;
    const ofCharge = envelope.data.filter((r) =>
      typeof r.transaction === "object" ? r.transaction?.id === id : r.transaction === id,
    );
    const chosen =
      ofCharge.find((r) => r.status === "processed") ??
      ofCharge.find((r) => refundOutcome(r).status === "PENDING") ??
      ofCharge[0];
    if (!chosen) return undefined;
    checkAmount(chargeReference, amountKobo, chosen.amount);
    return refundOutcome(chosen);
  };

  return {
    name: "paystack",
    environment: "production",
    needsInstruments: true,
    lookupTransfer,
    lookupDebit,
    lookupRefund,

    async transfer(em: Em, request: TransferRequest, options: CallOptions): Promise<TransferOutcome> {
      if (options.resumed) {
        const known = await lookupTransfer(request.reference, request.amountKobo);
        if (known) return known;
      }
      const instruments = await o.instruments.get(em, request.userId);
      const recipient =
        request.destination === "BANK" ? instruments.bankRecipientCode : instruments.walletRecipientCode;
      // Nothing was sent: the payout fails, and nothing is owed.
      if (!recipient) return { status: "FAILED", reason: "no_payout_instrument" };
      const { status, envelope } = await call<TransferData>("POST", "/transfer", {
        source: "balance",
        amount: Number(request.amountKobo),
        currency: "NGN",
        recipient,
        reference: request.reference,
        reason: `Loan ${request.partnerReference}`,
      });
      if (status < 400 && envelope.status) {
        checkAmount(request.reference, request.amountKobo, envelope.data?.amount);
        return transferOutcome(envelope.data);
      }
      // Refused. A reference it has already seen is refused too: then the transfer it holds is the answer.
      const known = await lookupTransfer(request.reference, request.amountKobo);
      return known ?? { status: "FAILED", reason: "provider_declined" };
    },

    async debit(em: Em, request: DebitRequest, options: CallOptions): Promise<DebitOutcome> {
      if (options.resumed) {
        const known = await lookupDebit(request.reference, request.amountKobo);
        if (known) return known;
      }
      const instruments = await o.instruments.get(em, request.userId);
      if (!instruments.debitAuthorizationCode || !instruments.debitEmail)
        return { status: "FAILED", reason: "no_debit_authorization" };
      const { status, envelope } = await call<ChargeData>("POST", "/transaction/charge_authorization", {
        authorization_code: instruments.debitAuthorizationCode,
        email: instruments.debitEmail,
        amount: Number(request.amountKobo),
        currency: "NGN",
        reference: request.reference,
      });
      if (status < 400 && envelope.status) {
        // Another amount than asked is never booked, as more or as less: it stays unsettled, loudly.
        checkAmount(request.reference, request.amountKobo, envelope.data?.amount);
        return debitOutcome(envelope.data);
      }
      const known = await lookupDebit(request.reference, request.amountKobo);
      return known ?? { status: "FAILED", reason: "debit_declined" };
    },

    async refund(_em: Em, request: RefundRequest, options: CallOptions): Promise<RefundOutcome> {
      if (options.resumed) {
        const known = await lookupRefund(request.chargeReference, request.amountKobo);
        if (known) return known;
      }
      const { status, envelope } = await call<RefundData>("POST", "/refund", {
        transaction: request.chargeReference,
        amount: Number(request.amountKobo),
        currency: "NGN",
        customer_note: "Repayment refunded: the loan payout was reversed",
        merchant_note: `Refund ${request.reference}`,
      });
      if (status < 400 && envelope.status) {
        checkAmount(request.chargeReference, request.amountKobo, envelope.data?.amount);
        return refundOutcome(envelope.data);
      }
      // Refused. A charge already refunded is refused too: then the refund it holds is the answer.
      const known = await lookupRefund(request.chargeReference, request.amountKobo);
      return known ?? { status: "FAILED", reason: "provider_declined" };
    },

    verifySignature(body: Buffer, signature: string | undefined): boolean {
      if (!signature || !/^[0-9a-f]{128}$/i.test(signature)) return false;
      const expected = createHmac("sha512", o.config.secretKey).update(body).digest();
      return timingSafeEqual(expected, Buffer.from(signature, "hex"));
    },
  };
}

/** Recognises the references this service gives the provider. */
export const providerReference = {
  isTransfer: (reference: string) => /^dsb_[0-9A-Z]{26}$/.test(reference),
  isDebit: (reference: string) => /^rpy_[0-9A-Za-z_]+:\d+$/.test(reference),
};
