import type { Metrics } from "../platform/metrics.ts";
import { createDeliveriesService } from "../webhooks/deliveries.service.ts";
import { createDeliveryWorker } from "../webhooks/delivery.worker.ts";
import type { DestinationPolicy } from "../webhooks/destination.ts";
import { createDnsResolver } from "../webhooks/dns.ts";
import { createOutbox } from "../webhooks/outbox.service.ts";
import { createSender } from "../webhooks/sender.ts";
import { createWebhookService } from "../webhooks/webhook.service.ts";
import type { ServiceDeps } from "./deps.ts";

/** Where webhooks may go, the outbox every state change writes its events to, and the delivery worker. */
export function webhookServices(deps: ServiceDeps, metrics: Metrics) {
  const { config, orm, clock, box, jobs, logger } = deps;
  const destinations: DestinationPolicy & { ownPorts: Set<number> } = {
    allowLocal: config.allowLocalWebhooks,
    allowLocalInProduction: deps.productionLocalWebhooks === true,
    resolver:
      deps.resolver ??
      createDnsResolver({ servers: config.webhooks.dnsServers, timeoutMs: config.webhooks.dnsTimeoutMs }),
    // Never a webhook destination: the configured ports now (a worker's deliveries may start before, or
    // without, the listeners), the bound ones added by the app once its listeners are up.
    ownPorts: new Set([config.port, config.internalPort].filter((port) => port > 0)),
  };
  const outbox = createOutbox({ jobs, clock });
  const sender = createSender({
    policy: destinations,
    connectTimeoutMs: config.webhooks.connectTimeoutMs,
    timeoutMs: config.webhooks.timeoutMs,
    // Both environments' attempts in flight: the worker's limits bound the sockets, not the agent's queue.
    maxSockets: 2 * config.webhooks.maxInFlight,
  });
  return {
    outbox,
    sender,
    /** Where webhooks may go; the app adds its listeners' ports once bound. */
    destinations,
    webhooks: createWebhookService({
      clock,
      box,
      outbox,
      destinations,
      sendLimit: config.webhooks.sendRateLimit,
      metrics,
    }),
    deliveries: createDeliveriesService({ clock }),
    deliveryWorker: createDeliveryWorker({
      clock,
      box,
      sender,
      outbox,
      logger,
      fork: () => orm.em.fork(),
      limits: config.webhooks,
      circuit: { threshold: config.webhooks.circuitFailures, maxWaitMs: config.webhooks.circuitMaxWaitMs },
      onAttempt: (a) => {
        metrics.webhookAttempts.inc({ outcome: a.outcome });
        metrics.webhookLatency.observe({ outcome: a.outcome }, a.latencyMs / 1000);
        if (a.firstAttempt) metrics.webhookFirstAttemptDelay.observe({}, a.sinceCreatedMs / 1000);
        if (a.lateMs !== undefined) metrics.webhookAttemptLateness.observe({}, Math.max(0, a.lateMs) / 1000);
      },
      onDeferred: (reason, count) => metrics.webhookDeferred.inc({ reason }, count),
      // Resolving and connecting, then the request: a claim outlives it, so a live worker never loses one.
      attemptMs: config.webhooks.connectTimeoutMs + config.webhooks.timeoutMs,
      holdMs: Math.min(5_000, config.webhooks.timeoutMs),
      sweepGraceMs: 5_000,
    }),
  };
}
