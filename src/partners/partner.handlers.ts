import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { PartnerSchema, PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { emOf } from "../platform/rpc/context.ts";
import { parseEnvironment } from "../platform/tenancy.ts";
import { type LimitsService, limitChangeOf, partnerLimitsMessage } from "../ratelimit/limits.service.ts";
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

/** `internal.v1.PartnerService`; the partner's limits are kept by the limits feature. */
export function createPartnerHandlers(
  partners: Partners,
  limits: LimitsService,
): ServiceImpl<typeof PartnerService> {
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
