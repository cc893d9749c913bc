import type { SecretBox } from "../platform/crypto/secret-box.ts";

/** A secret box AAD that binds a subscription's secret to it. */
export const secretAad = (webhookId: string) => `webhook-secret:${webhookId}`;

/**
 * Opens subscriptions' sealed secrets, remembering what it opened (keyed by the sealed bytes, so a rotated
 * secret is opened afresh): every attempt signs, and opening costs more than signing. Bounded: past 10,000
 * secrets it starts again.
 */
export function createSecretOpener(box: SecretBox) {
  const secrets = new Map<string, { enc: Buffer; secret: string }>();
  return (webhookId: string, enc: Buffer): string => {
    const hit = secrets.get(`${webhookId}:${enc.toString("base64")}`);
    if (hit) return hit.secret;
    const secret = box.open(enc, secretAad(webhookId)).toString("utf8");
    if (secrets.size > 10_000) secrets.clear();
    secrets.set(`${webhookId}:${enc.toString("base64")}`, { enc, secret });
    return secret;
  };
}
