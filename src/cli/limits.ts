import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { type ApiKeyService, SetApiKeyLimitsResponseSchema } from "../../gen/internal/v1/api_keys_pb.ts";
import type { ApiKeyLimits, Limits, PartnerLimits, TokenBucket } from "../../gen/internal/v1/limits_pb.ts";
import {
  GetPartnerLimitsResponseSchema,
  type PartnerService,
  SetPartnerLimitsResponseSchema,
} from "../../gen/internal/v1/partners_pb.ts";
import { type Flags, int, need, type Output, UsageError } from "./args.ts";

/** The usage lines of the limit commands, in the command line's usage. */
export const LIMITS_USAGE = `  partner limits --partner ID                    a partner's limits in each environment, and its keys' own
  partner set-limits (--partner ID --env sandbox|production | --key-id ID)
                     [--read-capacity N --read-refill R] [--write-capacity N --write-refill R]
                     [--snapshot-concurrency N] [--disbursements-per-user-per-day N]
                                                 set dedicated capacity: a partner's limits in one environment,
                                                 or one key's own buckets (they win over the partner's); what
                                                 is not given stays as it is. A bucket is set whole: capacity
                                                 1-100000 tokens and refill 0.01-10000 a second; snapshot
                                                 concurrency 1-1000 per key; disbursements per user per day
                                                 1-10000 (the last two per partner only)
  partner clear-limits (--partner ID --env sandbox|production | --key-id ID) [--only LIST]
                                                 back to the defaults (a key's: back to its partner's); LIST is
                                                 some of read,write,snapshot-concurrency,
                                                 disbursements-per-user-per-day (default: all of them)`;

/** The flags of the limit commands. */
export const LIMIT_FLAGS = {
  "read-capacity": { type: "string" },
  "read-refill": { type: "string" },
  "write-capacity": { type: "string" },
  "write-refill": { type: "string" },
  "snapshot-concurrency": { type: "string" },
  "disbursements-per-user-per-day": { type: "string" },
  only: { type: "string" },
} as const;

/** The flag of each field the service names in its errors. */
export const LIMIT_FLAG_OF: Record<string, string> = {
  "limits.read.capacity": "--read-capacity",
  "limits.read.refillPerSecond": "--read-refill",
  "limits.write.capacity": "--write-capacity",
  "limits.write.refillPerSecond": "--write-refill",
  "limits.snapshotConcurrency": "--snapshot-concurrency",
  "limits.disbursementsPerUserPerDay": "--disbursements-per-user-per-day",
  reset: "--only",
};

type Clients = { partners: Client<typeof PartnerService>; apiKeys: Client<typeof ApiKeyService> };

const json = <D extends DescMessage>(schema: D, m: MessageShape<D>) =>
  toJson(schema, m, { alwaysEmitImplicit: true });

/** `--partner P --env E` or `--key-id K`, never both. */
function target(f: Flags): { keyId: string } | { partnerId: string; environment: string } {
  if (f["key-id"] !== undefined) {
    if (f.partner !== undefined || f.env !== undefined)
      throw new UsageError("--key-id names one key: leave out --partner and --env");
    return { keyId: need(f, "key-id") };
  }
  const environment = need(f, "env");
  if (environment !== "sandbox" && environment !== "production")
    throw new UsageError("--env must be sandbox or production");
  return { partnerId: need(f, "partner"), environment };
}

/** A bucket's flags, both or neither. */
function bucket(f: Flags, name: "read" | "write") {
  const capacity = int(f, `${name}-capacity`, false);
  const refill = f[`${name}-refill`];
  if (capacity === undefined && refill === undefined) return undefined;
  if (capacity === undefined) throw new UsageError(`--${name}-capacity is required with --${name}-refill`);
  if (typeof refill !== "string")
    throw new UsageError(`--${name}-refill is required with --${name}-capacity`);
  if (!/^\d+(\.\d+)?$/.test(refill))
    throw new UsageError(`--${name}-refill must be tokens a second, such as 100 or 0.5`);
  return { capacity, refillPerSecond: Number(refill) };
}

const bucketText = (b: TokenBucket | undefined) => (b ? `${b.capacity} tokens, ${b.refillPerSecond}/s` : "");

/** The lines of one level: each effective limit, and whether this level sets it. */
function lines(
  effective: Limits | undefined,
  overrides: Limits | undefined,
  inherited: string,
  perKey = false,
) {
  const from = (own: unknown) => (own !== undefined ? "set here" : inherited);
  const out = [
    `  read    ${bucketText(effective?.read)}  (${from(overrides?.read)})`,
    `  write   ${bucketText(effective?.write)}  (${from(overrides?.write)})`,
  ];
  if (!perKey) {
    out.push(
      `  snapshot reads in flight per key  ${effective?.snapshotConcurrency}  (${from(overrides?.snapshotConcurrency)})`,
      `  disbursements per user per day  ${effective?.disbursementsPerUserPerDay}  (${from(overrides?.disbursementsPerUserPerDay)})`,
    );
  }
  return out;
}

const keyText = (k: ApiKeyLimits) =>
  [`key ${k.keyId} (${k.environment})`, ...lines(k.effective, k.overrides, "the partner's", true)].join("\n");

const partnerText = (p: PartnerLimits) =>
  [
    `${p.partnerId} ${p.environment}`,
    ...lines(p.effective, p.overrides, "default"),
    ...p.keys.map(keyText),
  ].join("\n");

/** Sets (or, with `reset`, clears) limits at the level the flags name. */
async function change(f: Flags, c: Clients, limits: Limits | object, reset: string[]): Promise<Output> {
  const t = target(f);
  if ("keyId" in t) {
    const res = await c.apiKeys.setApiKeyLimits({ keyId: t.keyId, limits, reset });
    if (!res.limits) throw new Error("no limits returned");
    return { json: json(SetApiKeyLimitsResponseSchema, res), text: `updated ${keyText(res.limits)}` };
  }
  const res = await c.partners.setPartnerLimits({ ...t, limits, reset });
  if (!res.limits) throw new Error("no limits returned");
  return { json: json(SetPartnerLimitsResponseSchema, res), text: `updated ${partnerText(res.limits)}` };
}

/** `partner limits`, `partner set-limits` and `partner clear-limits`. */
export const limitCommands: Record<string, (f: Flags, c: Clients) => Promise<Output>> = {
  async "partner limits"(f, c) {
    const res = await c.partners.getPartnerLimits({ partnerId: need(f, "partner") });
    return {
      json: json(GetPartnerLimitsResponseSchema, res),
      text: res.environments.map(partnerText).join("\n\n"),
    };
  },
  async "partner set-limits"(f, c) {
    const limits = {
      read: bucket(f, "read"),
      write: bucket(f, "write"),
      snapshotConcurrency: int(f, "snapshot-concurrency", false),
      disbursementsPerUserPerDay: int(f, "disbursements-per-user-per-day", false),
    };
    if (Object.values(limits).every((v) => v === undefined))
      throw new UsageError(
        "give a limit to set: --read-capacity with --read-refill, --write-capacity with --write-refill, " +
          "--snapshot-concurrency or --disbursements-per-user-per-day (clear-limits goes back to the defaults)",
      );
    return change(f, c, limits, []);
  },
  async "partner clear-limits"(f, c) {
    const only = f.only === undefined ? "all" : need(f, "only");
    const names = only.split(",").map((n) => n.trim().replaceAll("-", "_"));
    return change(f, c, {}, names);
  },
};
