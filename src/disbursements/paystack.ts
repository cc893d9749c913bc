import { createHmac, timingSafeEqual } from "node:crypto";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { PaymentInstrumentStore } from "../users/user.service.ts";
import {
  type ChargeData,
  createPaystackApi,
  debitOutcome,
  lookupDebit,
  lookupRefund,
  lookupTransfer,
  type PaystackApi,
  type PaystackConfig,
  type RefundData,
  refundOutcome,
  type TransferData,
  transferOutcome,
} from "./paystack-api.ts";
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

export { type PaystackConfig, ProviderUnavailableError } from "./paystack-api.ts";

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

/** What the adapter's calls share: the API, and the user's instruments (recipients, debit authorisation). */
interface Adapter {
  api: PaystackApi;
  instruments: PaymentInstrumentStore;
}

/** Sends a transfer from the balance to the user's bank or wallet recipient (see {@link createPaystackProvider}). */
async function transfer(
  a: Adapter,
  em: Em,
  request: TransferRequest,
  options: CallOptions,
): Promise<TransferOutcome> {
  if (options.resumed) {
    const known = await lookupTransfer(a.api, request.reference, request.amountKobo);
    if (known) return known;
  }
  const instruments = await a.instruments.get(em, request.userId);
  const recipient =
    request.destination === "BANK" ? instruments.bankRecipientCode : instruments.walletRecipientCode;
  // Nothing was sent: the payout fails, and nothing is owed.
  if (!recipient) return { status: "FAILED", reason: "no_payout_instrument" };
  const { status, envelope } = await a.api.call<TransferData>("POST", "/transfer", {
    source: "balance",
    amount: Number(request.amountKobo),
    currency: "NGN",
    recipient,
    reference: request.reference,
    reason: `Loan ${request.partnerReference}`,
  });
  if (status < 400 && envelope.status) {
    a.api.checkAmount(request.reference, request.amountKobo, envelope.data?.amount);
    return transferOutcome(envelope.data);
  }
  // Refused. A reference it has already seen is refused too: then the transfer it holds is the answer.
  const known = await lookupTransfer(a.api, request.reference, request.amountKobo);
  return known ?? { status: "FAILED", reason: "provider_declined" };
}

/** Charges the user's stored debit authorisation (see {@link createPaystackProvider}). */
async function debit(a: Adapter, em: Em, request: DebitRequest, options: CallOptions): Promise<DebitOutcome> {
  if (options.resumed) {
    const known = await lookupDebit(a.api, request.reference, request.amountKobo);
    if (known) return known;
  }
  const instruments = await a.instruments.get(em, request.userId);
  if (!instruments.debitAuthorizationCode || !instruments.debitEmail)
    return { status: "FAILED", reason: "no_debit_authorization" };
  const { status, envelope } = await a.api.call<ChargeData>("POST", "/transaction/charge_authorization", {
    authorization_code: instruments.debitAuthorizationCode,
    email: instruments.debitEmail,
    amount: Number(request.amountKobo),
    currency: "NGN",
    reference: request.reference,
  });
  if (status < 400 && envelope.status) {
    // Another amount than asked is never booked, as more or as less: it stays unsettled, loudly.
    a.api.checkAmount(request.reference, request.amountKobo, envelope.data?.amount);
    return debitOutcome(envelope.data);
  }
  const known = await lookupDebit(a.api, request.reference, request.amountKobo);
  return known ?? { status: "FAILED", reason: "debit_declined" };
}

/** Refunds a charge, which the provider refunds at most once over (see {@link createPaystackProvider}). */
async function refund(a: Adapter, request: RefundRequest, options: CallOptions): Promise<RefundOutcome> {
  if (options.resumed) {
    const known = await lookupRefund(a.api, request.chargeReference, request.amountKobo);
    if (known) return known;
  }
  const { status, envelope } = await a.api.call<RefundData>("POST", "/refund", {
    transaction: request.chargeReference,
    amount: Number(request.amountKobo),
    currency: "NGN",
    customer_note: "Repayment refunded: the loan payout was reversed",
    merchant_note: `Refund ${request.reference}`,
  });
  if (status < 400 && envelope.status) {
    a.api.checkAmount(request.chargeReference, request.amountKobo, envelope.data?.amount);
    return refundOutcome(envelope.data);
  }
  // Refused. A charge already refunded is refused too: then the refund it holds is the answer.
  const known = await lookupRefund(a.api, request.chargeReference, request.amountKobo);
  return known ?? { status: "FAILED", reason: "provider_declined" };
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
  const api = createPaystackApi(o.config, o.logger);
  const adapter: Adapter = { api, instruments: o.instruments };
  return {
    name: "paystack",
    environment: "production",
    needsInstruments: true,
    lookupTransfer: (reference, amountKobo) => lookupTransfer(api, reference, amountKobo),
    lookupDebit: (reference, amountKobo) => lookupDebit(api, reference, amountKobo),
    lookupRefund: (chargeReference, amountKobo) => lookupRefund(api, chargeReference, amountKobo),
    transfer: (em, request, options) => transfer(adapter, em, request, options),
    debit: (em, request, options) => debit(adapter, em, request, options),
    refund: (_em, request, options) => refund(adapter, request, options),
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
