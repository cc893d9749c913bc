import { ConfigError, checkHttpUrl, type Env, int, withoutTrailingSlash } from "./env.ts";

/** The production payment provider, and when an unfinished payout is picked up again. */
export interface PaymentSettings {
  /** A payout PENDING or PROCESSING this long is resumed by the worker sweep (and at worker start). */
  payoutResumeAfterMs: number;
  /**
   * The production payment provider (a Paystack-style HTTP API): PAYMENT_PROVIDER_URL and
   * PAYMENT_PROVIDER_SECRET_KEY. Unset: production disbursements answer 503. Sandbox always uses the simulator.
   */
  paymentProvider: { baseUrl: string; secretKey: string; timeoutMs: number } | undefined;
}

/** Reads PAYMENT_PROVIDER_URL, PAYMENT_PROVIDER_SECRET_KEY, PAYMENT_PROVIDER_TIMEOUT_MS and PAYOUT_RESUME_AFTER_MS. */
export function readPaymentSettings(env: Env): PaymentSettings {
  const providerUrl = env.PAYMENT_PROVIDER_URL || undefined;
  const providerSecret = env.PAYMENT_PROVIDER_SECRET_KEY || undefined;
  if (Boolean(providerUrl) !== Boolean(providerSecret)) {
    throw new ConfigError(
      "PAYMENT_PROVIDER_URL and PAYMENT_PROVIDER_SECRET_KEY are set together or not at all",
    );
  }
  checkHttpUrl("PAYMENT_PROVIDER_URL", providerUrl);
  const resumeAfterMs = int(env, "PAYOUT_RESUME_AFTER_MS", 60_000, 0, 86_400_000);
  const providerTimeoutMs = int(env, "PAYMENT_PROVIDER_TIMEOUT_MS", 30_000, 100, 120_000);
  if (providerUrl && resumeAfterMs > 0 && resumeAfterMs < providerTimeoutMs) {
    throw new ConfigError(
      "PAYOUT_RESUME_AFTER_MS must be longer than PAYMENT_PROVIDER_TIMEOUT_MS: a payout attempt holds its disbursement that long",
    );
  }
  return {
    payoutResumeAfterMs: resumeAfterMs,
    paymentProvider:
      providerUrl && providerSecret
        ? {
            baseUrl: withoutTrailingSlash(providerUrl),
            secretKey: providerSecret,
            timeoutMs: providerTimeoutMs,
          }
        : undefined,
  };
}
