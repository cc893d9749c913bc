import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * A port a running instance of the service listens on (its partner and internal listeners, an embedded
 * PostgreSQL), so that no instance sends a loopback webhook to a sibling's listener (ALLOW_LOCAL_WEBHOOKS).
 */
export const InstanceListenerEntity = defineEntity({
  name: "InstanceListener",
  tableName: "instance_listeners",
  properties: {
    /** The instance's own random id, made at start-up. */
    instanceId: p.text().primary(),
    port: p.integer().primary(),
    /** Refreshed while the instance runs; a row not refreshed for an hour is a crashed instance's. */
    seenAt: p.datetime(),
  },
});

/** An instance listener row. */
export type InstanceListener = InferEntity<typeof InstanceListenerEntity>;
