import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { Webhook_Status, WebhookSchema, WebhookStatsSchema } from "../../gen/partner/v1/webhooks_pb.ts";
import { webhookHealth } from "../../src/portal/web/webhook-health.tsx";

// What the portal says of a subscription comes from what happened to it, not only its ACTIVE flag: an endpoint
// with 0 delivered, 11 failed and its circuit open read as a green ACTIVE.
const now = new Date("2026-11-27T12:00:00Z");
const hook = (o: { delivered?: number; failed?: number; openUntil?: Date; disabled?: string }) =>
  create(WebhookSchema, {
    status: o.disabled ? Webhook_Status.DISABLED : Webhook_Status.ACTIVE,
    disabledReason: o.disabled ?? "",
    stats: create(WebhookStatsSchema, { delivered: o.delivered ?? 0, failed: o.failed ?? 0 }),
    ...(o.openUntil && { circuitOpenUntil: timestampFromDate(o.openUntil) }),
  });

describe("a subscription's health in the portal", () => {
  it("is failing while its circuit is open, whatever its flag, and says until when (Lagos time)", () => {
    const h = webhookHealth(hook({ failed: 11, openUntil: new Date("2026-11-27T12:05:00Z") }), now);
    expect(h).toEqual({
      kind: "bad",
      text: "Failing: deliveries paused until 27 Nov 2026, 13:05:00, then retried",
    });
  });
  it("is failing with failures and no delivery, warns of some failures, and is healthy with deliveries only", () => {
    expect(webhookHealth(hook({ failed: 11 }), now).kind).toBe("bad");
    expect(webhookHealth(hook({ failed: 1, delivered: 9 }), now)).toEqual({
      kind: "warn",
      text: "Some failures: 1 of 10 in 24 h",
    });
    expect(webhookHealth(hook({ delivered: 9 }), now).kind).toBe("good");
    expect(webhookHealth(hook({}), now)).toEqual({ kind: "none", text: "Active: nothing sent in 24 h" });
  });
  it("is disabled, with the reason, once the endpoint answered 410; a circuit that has closed says nothing", () => {
    expect(webhookHealth(hook({ disabled: "endpoint answered 410 Gone" }), now)).toEqual({
      kind: "bad",
      text: "Disabled: endpoint answered 410 Gone",
    });
    expect(webhookHealth(hook({ delivered: 3, openUntil: new Date("2026-11-27T11:00:00Z") }), now).kind).toBe(
      "good",
    );
  });
});
