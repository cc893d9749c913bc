import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { PartnerSchema, PartnerService } from "../../gen/internal/v1/partners_pb.ts";

/** The partner service's methods on the partner's limits (bound from the rate limits' handlers). */
type PartnerLimitMethods = "getPartnerLimits" | "setPartnerLimits";

import { emOf } from "../platform/rpc/context.ts";
import type { Partner } from "./partner.entity.ts";
import type { PartnerService as Partners } from "./partner.service.ts";

function toPartner(p: Partner): MessageInitShape<typeof PartnerSchema> {
  return {
    id: p.id,
    name: p.name,
    feeRateBps: p.feeRateBps,
    createdAt: timestampFromDate(p.createdAt),
    maxCostBps: p.maxCostBps,
    maxTenorDays: p.maxTenorDays,
  };
}

/**
 * `internal.v1.PartnerService`, but for the partner's limits: those methods are the rate limits' own
 * (`ratelimit/limits.handlers.ts`), bound beside these by the edge.
 */
export function createPartnerHandlers(
  partners: Partners,
): Omit<ServiceImpl<typeof PartnerService>, PartnerLimitMethods> {
  return {
    async createPartner(req, ctx) {
      return { partner: toPartner(await partners.create(emOf(ctx.values), req.name, req.feeRateBps)) };
    },
    async listPartners(_req, ctx) {
      return { partners: (await partners.list(emOf(ctx.values))).map(toPartner) };
    },
    async setPartnerTerms(req, ctx) {
      const partner = await partners.setTerms(
        emOf(ctx.values),
        req.partnerId,
        req.maxCostBps,
        req.maxTenorDays,
      );
      return { partner: toPartner(partner) };
    },
    async setPartnerFee(req, ctx) {
      return { partner: toPartner(await partners.setFee(emOf(ctx.values), req.partnerId, req.feeRateBps)) };
    },
  };
}
