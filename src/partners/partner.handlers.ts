import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { PartnerSchema, PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import type { Partner } from "./partner.entity.ts";
import type { PartnerService as Partners } from "./partner.service.ts";

function toPartner(p: Partner): MessageInitShape<typeof PartnerSchema> {
  return { id: p.id, name: p.name, feeRateBps: p.feeRateBps, createdAt: timestampFromDate(p.createdAt) };
}

/** `internal.v1.PartnerService`. */
export function createPartnerHandlers(partners: Partners): ServiceImpl<typeof PartnerService> {
  return {
    async createPartner(req) {
      return { partner: toPartner(await partners.create(req.name, req.feeRateBps)) };
    },
    async listPartners() {
      return { partners: (await partners.list()).map(toPartner) };
    },
    async setPartnerFee(req) {
      return { partner: toPartner(await partners.setFee(req.partnerId, req.feeRateBps)) };
    },
  };
}
