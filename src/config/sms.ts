import type { SmsConfig } from "../person/sms.ts";
import { ConfigError, checkHttpUrl, type Env, int, withoutTrailingSlash } from "./env.ts";

/** The SMS provider that sends production's one-time codes. */
export interface SmsSettings {
  /**
   * The SMS provider that sends production's one-time codes (a Termii-style HTTP API): SMS_PROVIDER_URL and
   * SMS_PROVIDER_API_KEY, with SMS_SENDER_ID. Unset: production consent links are refused (no code could
   * reach the person). The sandbox never sends texts: its code is fixed.
   */
  smsProvider: SmsConfig | undefined;
}

/** Reads SMS_PROVIDER_URL, SMS_PROVIDER_API_KEY, SMS_SENDER_ID and SMS_PROVIDER_TIMEOUT_MS. */
export function readSmsSettings(env: Env): SmsSettings {
  const smsUrl = env.SMS_PROVIDER_URL || undefined;
  const smsKey = env.SMS_PROVIDER_API_KEY || undefined;
  if (Boolean(smsUrl) !== Boolean(smsKey)) {
    throw new ConfigError("SMS_PROVIDER_URL and SMS_PROVIDER_API_KEY are set together or not at all");
  }
  checkHttpUrl("SMS_PROVIDER_URL", smsUrl);
  const senderId = env.SMS_SENDER_ID || "Verify";
  if (!/^[A-Za-z0-9 ]{3,11}$/.test(senderId)) {
    throw new ConfigError("SMS_SENDER_ID must be 3 to 11 letters, digits or spaces");
  }
  return {
    smsProvider:
      smsUrl && smsKey
        ? {
            baseUrl: withoutTrailingSlash(smsUrl),
            apiKey: smsKey,
            senderId,
            timeoutMs: int(env, "SMS_PROVIDER_TIMEOUT_MS", 10_000, 100, 60_000),
          }
        : undefined,
  };
}
