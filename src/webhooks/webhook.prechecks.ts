import type { WebhookService as WebhookApi } from "../../gen/partner/v1/webhooks_pb.ts";
import { callerOf } from "../platform/rpc/context.ts";
import type { Prechecks } from "../platform/rpc/prechecks.ts";
import type { WebhookService } from "./webhook.service.ts";

/**
 * What `partner.v1.WebhookService` checks before a request's transaction opens: a new destination's DNS, a
 * network wait that must not hold a pooled connection (the idempotency record's transaction would hold one for
 * as long as a partner's name server keeps silent).
 */
export function createWebhookPrechecks(webhooks: WebhookService): Prechecks<typeof WebhookApi> {
  return {
    createWebhook: (req, values) => webhooks.checkDestination(callerOf(values).environment, req.url),
    updateWebhook: async (req, values) => {
      if (req.url !== undefined) await webhooks.checkDestination(callerOf(values).environment, req.url);
    },
  };
}
