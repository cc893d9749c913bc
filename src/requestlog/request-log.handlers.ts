import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ContextValues, ServiceImpl } from "@connectrpc/connect";
import {
  type LoggedRequestSchema,
  ListRequestsRequest_Outcome as Outcome,
  type RequestLogService as RequestLogApi,
} from "../../gen/partner/v1/requests_pb.ts";
import { ApiError } from "../platform/errors.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { Caller } from "../platform/tenancy.ts";
import { portalMemberOf } from "../portal/session.service.ts";
import { arrivedAt, type RequestFilter } from "./request-log.repository.ts";
import type { LoggedCallView, RequestLogService } from "./request-log.service.ts";

/** A member of the portal, or `permission_denied` for an API key: a leaked key must not read the partner's calls. */
function memberCaller(values: ContextValues): Caller {
  if (!portalMemberOf(values))
    throw new ApiError("permission_denied", "The request log is in the partner portal.");
  return callerOf(values);
}

function toLoggedRequest(r: LoggedCallView): MessageInitShape<typeof LoggedRequestSchema> {
  return {
    id: r.id,
    createdAt: timestampFromDate(arrivedAt(r.id)),
    method: r.method,
    route: r.route,
    face: r.face,
    status: r.status,
    errorCode: r.error_code ?? "",
    durationMs: Math.round(r.duration_us / 100) / 10,
    apiKeyId: r.api_key_id,
    apiKeyPrefix: r.api_key_prefix,
    error: r.error ?? undefined,
  };
}

const STATUS: Record<Outcome, [number, number] | undefined> = {
  [Outcome.OUTCOME_UNSPECIFIED]: undefined,
  [Outcome.SUCCEEDED]: [100, 399],
  [Outcome.FAILED]: [400, 599],
  [Outcome.CLIENT_ERROR]: [400, 499],
  [Outcome.SERVER_ERROR]: [500, 599],
};

/** `partner.v1.RequestLogService`, for portal members only. */
export function createRequestLogHandlers(log: RequestLogService): ServiceImpl<typeof RequestLogApi> {
  return {
    async listRequests(req, ctx) {
      const caller = memberCaller(ctx.values);
      const filter: RequestFilter = {
        ...(STATUS[req.outcome] && { status: STATUS[req.outcome] }),
        // Only failed calls have a code: the filter reads the failed calls' index.
        ...(req.errorCode && { errorCode: req.errorCode, status: STATUS[req.outcome] ?? [400, 599] }),
        ...(req.route && { route: req.route }),
        ...(req.apiKeyId && { apiKeyId: req.apiKeyId }),
      };
      const page = await log.list(
        emOf(ctx.values),
        caller,
        filter,
        req.limit || 50,
        req.startingAfter || undefined,
      );
      return {
        requests: page.requests.map(toLoggedRequest),
        hasMore: page.hasMore,
        nextStartingAfter: page.next,
      };
    },
    async getRequest(req, ctx) {
      return { request: toLoggedRequest(await log.get(emOf(ctx.values), memberCaller(ctx.values), req.id)) };
    },
  };
}
