import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ApiKey_Status, type ApiKeySchema, type ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import type { Clock } from "../platform/clock.ts";
import { emOf } from "../platform/rpc/context.ts";
import { parseEnvironment } from "../platform/tenancy.ts";
import type { ApiKeyRow } from "./api-key.entity.ts";
import { apiKeyStatus, type ApiKeyService as Keys } from "./api-key.service.ts";

function toApiKey(row: ApiKeyRow, now: Date): MessageInitShape<typeof ApiKeySchema> {
  return {
    id: row.id,
    partnerId: row.partnerId,
    environment: row.environment,
    prefix: row.prefix,
    status: ApiKey_Status[apiKeyStatus(row, now)],
    createdAt: timestampFromDate(row.createdAt),
    expiresAt: row.expiresAt ? timestampFromDate(row.expiresAt) : undefined,
    revokedAt: row.revokedAt ? timestampFromDate(row.revokedAt) : undefined,
  };
}

/**
 * `internal.v1.ApiKeyService`, but for a key's own limits: that method is the rate limits' own
 * (`ratelimit/limits.handlers.ts`), bound beside these by the edge.
 */
export function createApiKeyHandlers(
  keys: Keys,
  clock: Clock,
): Omit<ServiceImpl<typeof ApiKeyService>, "setApiKeyLimits"> {
  return {
    async issueApiKey(req, ctx) {
      const { row, key } = await keys.issue(
        emOf(ctx.values),
        req.partnerId,
        parseEnvironment(req.environment),
      );
      return { apiKey: toApiKey(row, clock.now()), key };
    },
    async rollApiKey(req, ctx) {
      const { old, row, key } = await keys.roll(emOf(ctx.values), req.keyId, req.expiresInHours);
      const now = clock.now();
      return { oldApiKey: toApiKey(old, now), apiKey: toApiKey(row, now), key };
    },
    async revokeApiKey(req, ctx) {
      return { apiKey: toApiKey(await keys.revoke(emOf(ctx.values), req.keyId), clock.now()) };
    },
    async listApiKeys(req, ctx) {
      const now = clock.now();
      return { apiKeys: (await keys.list(emOf(ctx.values), req.partnerId)).map((r) => toApiKey(r, now)) };
    },
  };
}
