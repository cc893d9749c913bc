import { coreServices } from "./services/core.ts";
import type { ServiceDeps } from "./services/deps.ts";
import { retentionService, sandboxServices } from "./services/housekeeping.ts";
import { moneyServices } from "./services/money.ts";
import { hostedPages } from "./services/pages.ts";
import { peopleServices } from "./services/people.ts";
import { webhookServices } from "./services/webhooks.ts";

export type { ServiceDeps } from "./services/deps.ts";

/** The typed registry of services: built once per process, shared by handlers and workers. */
export type Services = ReturnType<typeof createServices>;

/**
 * Builds every service, each from the ones it needs (src/services/: who is who, webhooks, people, money, the
 * sandbox and the purge). Nothing here listens or polls: that is the app's job, per role.
 */
export function createServices(deps: ServiceDeps) {
  const core = coreServices(deps);
  const webhooks = webhookServices(deps, core.metrics);
  const people = peopleServices(deps, core, webhooks.outbox);
  const money = moneyServices(deps, core, people, webhooks.outbox);
  return {
    ...core,
    ...webhooks,
    ...people,
    ...money,
    ...sandboxServices(deps, core, people, money),
    hostedPages: hostedPages(deps, { ...people, mandates: money.mandates }),
    retention: retentionService(deps, core, people, money),
  };
}
