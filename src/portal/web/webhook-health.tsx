import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Webhook, Webhook_Status } from "../../../gen/partner/v1/webhooks_pb.ts";
import { zonedTime } from "./ui.tsx";

/** How a subscription fares, from what happened to it, not only its flag. */
export function webhookHealth(
  w: Webhook,
  now = new Date(),
): { kind: "good" | "warn" | "bad" | "none"; text: string } {
  if (w.status === Webhook_Status.DISABLED)
    return { kind: "bad", text: `Disabled${w.disabledReason ? `: ${w.disabledReason}` : ""}` };
  const openUntil = w.circuitOpenUntil ? timestampDate(w.circuitOpenUntil) : undefined;
  if (openUntil && openUntil > now)
    return { kind: "bad", text: `Failing: deliveries paused until ${zonedTime(openUntil)}, then retried` };
  const delivered = w.stats?.delivered ?? 0;
  const failed = w.stats?.failed ?? 0;
  if (failed > 0 && delivered === 0)
    return { kind: "bad", text: `Failing: ${failed} failed, none delivered in 24 h` };
  if (failed > 0) return { kind: "warn", text: `Some failures: ${failed} of ${failed + delivered} in 24 h` };
  if (delivered > 0) return { kind: "good", text: `Healthy: ${delivered} delivered in 24 h` };
  return { kind: "none", text: "Active: nothing sent in 24 h" };
}

/** The health as a badge people read in words, its colour only a help. */
export function WebhookHealth({ webhook }: { webhook: Webhook }) {
  const h = webhookHealth(webhook);
  return <span class={`badge ${h.kind}`}>{h.text}</span>;
}
