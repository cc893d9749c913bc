import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ContextValues, ServiceImpl } from "@connectrpc/connect";
import { ApiKey_Status, type ApiKeySchema, type ApiKeyService } from "../../gen/partner/v1/api_keys_pb.ts";
import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { Caller } from "../platform/tenancy.ts";
import { portalMemberOf } from "../portal/session.service.ts";
import type { ApiKeyRow } from "./api-key.entity.ts";
import { apiKeyStatus, type ApiKeyService as Keys } from "./api-key.service.ts";

function toApiKey(row: ApiKeyRow, now: Date): MessageInitShape<typeof ApiKeySchema> {
  return {
    id: row.id,
    environment: row.environment,
    prefix: row.prefix,
    status: ApiKey_Status[apiKeyStatus(row, now)],
    createdAt: timestampFromDate(row.createdAt),
    expiresAt: row.expiresAt ? timestampFromDate(row.expiresAt) : undefined,
    revokedAt: row.revokedAt ? timestampFromDate(row.revokedAt) : undefined,
  };
}

/**
 * The person calling, or `permission_denied` for an API key: a leaked key must never mint, roll or extend
 * keys (docs/portal.md). The session's gate already refuses a viewer's writes; this says so again here, where
 * the rule is read.
 */
function personOf(values: ContextValues, writes: boolean): Caller {
  const member = portalMemberOf(values);
  if (!member) throw new ApiError("permission_denied", "API keys are managed in the partner portal.");
  if (writes && member.role === "viewer")
    throw new ApiError("permission_denied", "A viewer may only read; ask an admin for the developer role.");
  return callerOf(values);
}

/** A key of the caller's partner and environment; any other key is `not_found`, as an unknown id is. */
async function ownKey(keys: Keys, em: Em, caller: Caller, id: string): Promise<ApiKeyRow> {
  const row = await keys.get(em, id);
  if (row.partnerId !== caller.partnerId || row.environment !== caller.environment)
    throw new ApiError("not_found", `No API key ${id}.`);
  return row;
}

/**
 * `partner.v1.ApiKeyService`: the portal's key management, on the same rules as the operator's
 * (`internal.v1.ApiKeyService`), for the session's partner and selected environment only.
 */
export function createPartnerApiKeyHandlers(keys: Keys, clock: Clock): ServiceImpl<typeof ApiKeyService> {
  return {
    async listApiKeys(_req, ctx) {
      const caller = personOf(ctx.values, false);
      const rows = await keys.list(emOf(ctx.values), caller.partnerId);
      const now = clock.now();
      return {
        apiKeys: rows.filter((r) => r.environment === caller.environment).map((r) => toApiKey(r, now)),
      };
    },
    async issueApiKey(_req, ctx) {
      const caller = personOf(ctx.values, true);
      const { row, key } = await keys.issue(emOf(ctx.values), caller.partnerId, caller.environment);
      return { apiKey: toApiKey(row, clock.now()), key };
    },
    async rollApiKey(req, ctx) {
      const caller = personOf(ctx.values, true);
      const em = emOf(ctx.values);
      await ownKey(keys, em, caller, req.id);
      const { old, row, key } = await keys.roll(em, req.id, req.expiresInHours);
      const now = clock.now();
      return { oldApiKey: toApiKey(old, now), apiKey: toApiKey(row, now), key };
    },
    async revokeApiKey(req, ctx) {
      const caller = personOf(ctx.values, true);
      const em = emOf(ctx.values);
      await ownKey(keys, em, caller, req.id);
      return { apiKey: toApiKey(await keys.revoke(em, req.id), clock.now()) };
    },
  };
}
