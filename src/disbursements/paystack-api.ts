import type { Logger } from "../platform/logger.ts";
import type { DebitOutcome, RefundOutcome, TransferOutcome } from "./provider.ts";

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
export interface Envelope<T> {
  status?: boolean;
  message?: string;
  data?: T;
}

export interface TransferData {
  reference?: string;
  status?: string;
  amount?: number;
}

export interface ChargeData {
  /** The provider's own id of the transaction, which its refunds name. */
  id?: number;
  reference?: string;
  status?: string;
  amount?: number;
  gateway_response?: string;
}

export interface RefundData {
  status?: string;
  amount?: number;
  /** The refunded transaction: its id in lists, the transaction itself on create. */
  transaction?: number | { id?: number; reference?: string };
}

/** Maps the provider's transfer status to ours. Anything it might still settle is PENDING, never FAILED. */
export function transferOutcome(data: TransferData | undefined): TransferOutcome {
  const status = data?.status ?? "";
  if (status === "success") return { status: "SUCCESS" };
  if (status === "failed" || status === "abandoned" || status === "rejected")
    return { status: "FAILED", reason: "transfer_failed" };
  if (status === "reversed") return { status: "REVERSED", reason: "transfer_reversed" };
  // pending, otp, received, queued, processing…: not settled yet.
  return { status: "PENDING" };
}

/** Maps the provider's charge status to ours; a failed charge's reason is a stable code, not the bank's words. */
export function debitOutcome(data: ChargeData | undefined): DebitOutcome {
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
export function refundOutcome(data: RefundData | undefined): RefundOutcome {
  const status = data?.status ?? "";
  if (status === "processed") return { status: "SUCCESS" };
  if (status === "failed") return { status: "FAILED", reason: "refund_failed" };
  return { status: "PENDING" };
}

/** One call to the provider's API, and the check every answer about money gets. */
export interface PaystackApi {
  /** One call. Answers the envelope and status for 2xx and 4xx; throws ProviderUnavailableError otherwise. */
  call<T>(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
  ): Promise<{ status: number; envelope: Envelope<T> }>;
  /** Fails loudly when the provider holds another amount under our reference: that is never settled silently. */
  checkAmount(reference: string, expected: bigint, actual: number | undefined): void;
}

/** The provider's HTTP API under our secret key. */
export function createPaystackApi(config: PaystackConfig, logger: Logger): PaystackApi {
  const base = config.baseUrl.replace(/\/+$/, "");
  return {
    async call<T>(method: "GET" | "POST", path: string, body?: unknown) {
      let res: Response;
      try {
        res = await fetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${config.secretKey}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          redirect: "error",
          signal: AbortSignal.timeout(config.timeoutMs),
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
    },
    checkAmount(reference, expected, actual) {
      if (actual !== undefined && BigInt(actual) !== expected) {
        logger.error("payment provider amount differs from ours", { reference });
        throw new Error(`provider amount for ${reference} differs from ours`);
      }
    },
  };
}

/** The provider's current answer about a transfer we sent, or undefined when it has none under this reference. */
export async function lookupTransfer(api: PaystackApi, reference: string, amountKobo: bigint) {
  const { status, envelope } = await api.call<TransferData>(
    "GET",
    `/transfer/verify/${encodeURIComponent(reference)}`,
  );
  if (status >= 400 || !envelope.status || !envelope.data) return undefined;
  api.checkAmount(reference, amountKobo, envelope.data.amount);
  return transferOutcome(envelope.data);
}

/** The provider's current answer about a charge we made, or undefined when it has none under this reference. */
export async function lookupDebit(api: PaystackApi, reference: string, amountKobo: bigint) {
  const { status, envelope } = await api.call<ChargeData>(
    "GET",
    `/transaction/verify/${encodeURIComponent(reference)}`,
  );
  if (status >= 400 || !envelope.status || !envelope.data) return undefined;
  api.checkAmount(reference, amountKobo, envelope.data.amount);
  return debitOutcome(envelope.data);
}

/**
 * The refund of a charge: the charge's own id, then the provider's refunds of it. A processed one answers;
 * else one still under way; else (every one failed) the failure.
 */
export async function lookupRefund(api: PaystackApi, chargeReference: string, amountKobo: bigint) {
  const charge = await api.call<ChargeData>(
    "GET",
    `/transaction/verify/${encodeURIComponent(chargeReference)}`,
  );
  const id = charge.envelope.data?.id;
  if (charge.status >= 400 || !charge.envelope.status || id === undefined) return undefined;
  const { status, envelope } = await api.call<RefundData[]>("GET", `/refund?transaction=${id}`);
  if (status >= 400 || !envelope.status || !Array.isArray(envelope.data)) return undefined;
  const ofCharge = envelope.data.filter((r) =>
    typeof r.transaction === "object" ? r.transaction?.id === id : r.transaction === id,
  );
  const chosen =
    ofCharge.find((r) => r.status === "processed") ??
    ofCharge.find((r) => refundOutcome(r).status === "PENDING") ??
    ofCharge[0];
  if (!chosen) return undefined;
  api.checkAmount(chargeReference, amountKobo, chosen.amount);
  return refundOutcome(chosen);
}
