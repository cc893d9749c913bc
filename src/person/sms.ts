/** Where the SMS provider is and how we authenticate to it (SMS_PROVIDER_URL, SMS_PROVIDER_API_KEY). */
export interface SmsConfig {
  /** Base URL of the provider's API, such as `https://api.ng.termii.com`. */
  baseUrl: string;
  apiKey: string;
  /** The sender id the person sees (SMS_SENDER_ID). */
  senderId: string;
  /** Time allowed for one call. */
  timeoutMs: number;
}

/** Sends one text message. Throws when the provider did not take it. */
export interface SmsSender {
  send(to: string, text: string): Promise<void>;
}

/**
 * The HTTP adapter for a Termii-style SMS provider: `POST /api/sms/send` with the API key in the JSON body,
 * on the transactional (`dnd`) route, which reaches numbers on the do-not-disturb list. A message is never
 * logged: it carries a one-time code.
 */
export function createSmsSender(config: SmsConfig): SmsSender {
  const base = config.baseUrl.replace(/\/+$/, "");
  return {
    async send(to, text) {
      const res = await fetch(`${base}/api/sms/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          api_key: config.apiKey,
          to: to.replace(/^\+/, ""),
          from: config.senderId,
          sms: text,
          type: "plain",
          channel: "dnd",
        }),
        redirect: "error",
        signal: AbortSignal.timeout(config.timeoutMs),
      });
      const body = (await res.json().catch(() => ({}))) as { message_id?: string; code?: string };
      if (!res.ok || !body.message_id) throw new Error(`SMS provider answered HTTP ${res.status}`);
    },
  };
}
