import { createHmac, createSecretKey, randomBytes } from "node:crypto";

/** A new subscription secret: `whsec_` + base64 of 32 random bytes (CONTRACT.md §5). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

/** Options for {@link signatureHeaders}. */
export interface SignatureInput {
  eventId: string;
  deliveryId: string;
  /** The exact body that will be sent. */
  body: string;
  /** The current secret first, then the previous one while it still signs. */
  secrets: readonly string[];
  /** Unix seconds, fresh on every attempt. */
  timestamp: number;
}

/**
 * The signature headers of one attempt: `X-Service-Signature: t=…,v1=…[,v1=…]` (HMAC-SHA256 over `t.body`,
 * keyed with the whole `whsec_…` string, as Stripe does) and the Standard Webhooks headers (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature: v1,<base64>` over `id.t.body`, keyed with the decoded secret
 * bytes), so that any Standard Webhooks library verifies the delivery too.
 */
export function signatureHeaders({
  eventId,
  deliveryId,
  body,
  secrets,
  timestamp,
}: SignatureInput): Record<string, string> {
  const t = String(timestamp);
  const ours = secrets.map((s) => `v1=${createHmac("sha256", s).update(`${t}.${body}`).digest("hex")}`);
  const standard = secrets.map((s) => {
    // A KeyObject: a Buffer key costs Node 24.21 several times more per call (see secretKeyOf).
    const key = createSecretKey(Buffer.from(s.replace(/^whsec_/, ""), "base64"));
    return `v1,${createHmac("sha256", key).update(`${eventId}.${t}.${body}`).digest("base64")}`;
  });
  return {
    "x-service-signature": `t=${t},${ours.join(",")}`,
    "x-service-event-id": eventId,
    "x-service-delivery-id": deliveryId,
    "webhook-id": eventId,
    "webhook-timestamp": t,
    "webhook-signature": standard.join(" "),
  };
}
