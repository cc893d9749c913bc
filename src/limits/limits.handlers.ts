import type { ServiceImpl } from "@connectrpc/connect";
import type { ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import type { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { emOf } from "../platform/rpc/context.ts";
import { parseEnvironment } from "../platform/tenancy.ts";
import type { LimitsService } from "./limits.service.ts";
import { keyLimitsMessage, limitChangeOf, partnerLimitsMessage } from "./limits-messages.ts";

/**
 * The methods of `internal.v1.PartnerService` on a partner's limits (dedicated capacity, docs/rate-limits.md):
 * the edge binds them beside the partners' own handlers, so the partners know nothing of the limits.
 */
export function createPartnerLimitsHandlers(
  limits: LimitsService,
): Pick<ServiceImpl<typeof PartnerService>, "getPartnerLimits" | "setPartnerLimits"> {
  return {
    async getPartnerLimits(req, ctx) {
      return {
        environments: (await limits.forPartner(emOf(ctx.values), req.partnerId)).map(partnerLimitsMessage),
      };
    },
    async setPartnerLimits(req, ctx) {
      const view = await limits.setForPartner(
        emOf(ctx.values),
        req.partnerId,
        parseEnvironment(req.environment),
        limitChangeOf(req.limits, req.reset),
      );
      return { limits: partnerLimitsMessage(view) };
    },
  };
}

/** The method of `internal.v1.ApiKeyService` on a key's own limits, bound beside the API keys' handlers. */
export function createApiKeyLimitsHandlers(
  limits: LimitsService,
): Pick<ServiceImpl<typeof ApiKeyService>, "setApiKeyLimits"> {
  return {
    async setApiKeyLimits(req, ctx) {
      const change = limitChangeOf(req.limits, req.reset);
      return { limits: keyLimitsMessage(await limits.setForKey(emOf(ctx.values), req.keyId, change)) };
    },
  };
}
