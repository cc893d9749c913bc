import type { MessageInitShape } from "@bufbuild/protobuf";
import type {
  ApiKeyLimitsSchema,
  Limits as LimitsMessage,
  LimitsSchema,
  PartnerLimitsSchema,
} from "../../gen/internal/v1/limits_pb.ts";
import type { KeyLimitsView, PartnerLimitsView } from "./limits.service.ts";
import type { LimitChange, LimitOverrides } from "./limits.ts";

/*
 * The limits as the internal API carries them (`internal.v1.Limits` and the views around it). The methods that
 * read and change them are in the partner and API key services, served by `limits.handlers.ts`.
 */

/** Limits (an override or the effective ones) as the message: an absent limit is an unset field. */
function toLimits(l: LimitOverrides): MessageInitShape<typeof LimitsSchema> {
  return {
    read: l.read && { capacity: l.read.capacity, refillPerSecond: l.read.refillPerSecond },
    write: l.write && { capacity: l.write.capacity, refillPerSecond: l.write.refillPerSecond },
    snapshotConcurrency: l.snapshotConcurrency,
    disbursementsPerUserPerDay: l.disbursementsPerUserPerDay,
  };
}

/** One key's overrides and effective limits as the `ApiKeyLimits` message. */
export function keyLimitsMessage(k: KeyLimitsView): MessageInitShape<typeof ApiKeyLimitsSchema> {
  return {
    keyId: k.keyId,
    partnerId: k.partnerId,
    environment: k.environment,
    overrides: toLimits(k.overrides),
    effective: toLimits(k.effective),
  };
}

/** A partner's limits in one environment, with its keys', as the `PartnerLimits` message. */
export function partnerLimitsMessage(p: PartnerLimitsView): MessageInitShape<typeof PartnerLimitsSchema> {
  return {
    partnerId: p.partnerId,
    environment: p.environment,
    overrides: toLimits(p.overrides),
    effective: toLimits(p.effective),
    keys: p.keys.map(keyLimitsMessage),
  };
}

/** The change a request asks for. A bucket present in the request is set whole, even at zero (then refused). */
export function limitChangeOf(limits: LimitsMessage | undefined, reset: string[]): LimitChange {
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
