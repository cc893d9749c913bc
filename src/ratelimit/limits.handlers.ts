import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type {
  SetApiKeyLimitsRequest,
  SetApiKeyLimitsResponseSchema,
} from "../../gen/internal/v1/api_keys_pb.ts";
import type {
  ApiKeyLimitsSchema,
  Limits as LimitsMessage,
  LimitsSchema,
  PartnerLimitsSchema,
} from "../../gen/internal/v1/limits_pb.ts";
import type {
  GetPartnerLimitsRequest,
  GetPartnerLimitsResponseSchema,
  SetPartnerLimitsRequest,
  SetPartnerLimitsResponseSchema,
} from "../../gen/internal/v1/partners_pb.ts";
import { parseEnvironment } from "../apikeys/api-key.handlers.ts";
import { emOf } from "../platform/rpc/context.ts";
import type { KeyLimitsView, LimitsService, PartnerLimitsView } from "./limits.service.ts";
import type { LimitChange, LimitOverrides } from "./limits.ts";

/** Limits (an override or the effective ones) as the message: an absent limit is an unset field. */
function toLimits(l: LimitOverrides): MessageInitShape<typeof LimitsSchema> {
  return {
    read: l.read && { capacity: l.read.capacity, refillPerSecond: l.read.refillPerSecond },
    write: l.write && { capacity: l.write.capacity, refillPerSecond: l.write.refillPerSecond },
    snapshotConcurrency: l.snapshotConcurrency,
    disbursementsPerUserPerDay: l.disbursementsPerUserPerDay,
  };
}

function toKeyLimits(k: KeyLimitsView): MessageInitShape<typeof ApiKeyLimitsSchema> {
  return {
    keyId: k.keyId,
    partnerId: k.partnerId,
    environment: k.environment,
    overrides: toLimits(k.overrides),
    effective: toLimits(k.effective),
  };
}

function toPartnerLimits(p: PartnerLimitsView): MessageInitShape<typeof PartnerLimitsSchema> {
  return {
    partnerId: p.partnerId,
    environment: p.environment,
    overrides: toLimits(p.overrides),
    effective: toLimits(p.effective),
    keys: p.keys.map(toKeyLimits),
  };
}

/** The change a request asks for. A bucket present in the request is set whole, even at zero (then refused). */
function toChange(limits: LimitsMessage | undefined, reset: string[]): LimitChange {
  return {
    set: {
      read: limits?.read && { capacity: limits.read.capacity, refillPerSecond: limits.read.refillPerSecond },
      write: limits?.write && {
        capacity: limits.write.capacity,
        refillPerSecond: limits.write.refillPerSecond,
      },
      snapshotConcurrency: limits?.snapshotConcurrency,
      disbursementsPerUserPerDay: limits?.disbursementsPerUserPerDay,
    },
    reset,
  };
}

/**
 * The limit methods of `internal.v1.PartnerService` and `internal.v1.ApiKeyService` (dedicated capacity,
 * CONTRACT.md §8), merged into those services' handlers.
 */
export function createLimitsHandlers(limits: LimitsService) {
  return {
    partner: {
      async getPartnerLimits(
        req: GetPartnerLimitsRequest,
        ctx: HandlerContext,
      ): Promise<MessageInitShape<typeof GetPartnerLimitsResponseSchema>> {
        return {
          environments: (await limits.forPartner(emOf(ctx.values), req.partnerId)).map(toPartnerLimits),
        };
      },
      async setPartnerLimits(
        req: SetPartnerLimitsRequest,
        ctx: HandlerContext,
      ): Promise<MessageInitShape<typeof SetPartnerLimitsResponseSchema>> {
        const view = await limits.setForPartner(
          emOf(ctx.values),
          req.partnerId,
          parseEnvironment(req.environment),
          toChange(req.limits, req.reset),
        );
        return { limits: toPartnerLimits(view) };
      },
    },
    apiKey: {
      async setApiKeyLimits(
        req: SetApiKeyLimitsRequest,
        ctx: HandlerContext,
      ): Promise<MessageInitShape<typeof SetApiKeyLimitsResponseSchema>> {
        const view = await limits.setForKey(emOf(ctx.values), req.keyId, toChange(req.limits, req.reset));
        return { limits: toKeyLimits(view) };
      },
    },
  };
}
