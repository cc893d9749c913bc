import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { environments, tenantFilter } from "../platform/tenancy.ts";

/**
 * One call made with a partner's API key, as it was answered (proto/partner/v1/requests.proto): daily partitions
 * by its `req_` id, dropped whole once past 30 days (request-log.repository.ts). Never a request or response
 * body; the error body only, for a call that failed.
 */
export const RequestLogEntity = defineEntity({
  name: "RequestLog",
  tableName: "request_log",
  filters: tenantFilter,
  // The key is the tenant and then the id: one index serves the writes' uniqueness, a lookup by id and the
  // tenant's pages newest first (a second, by id alone, cost every logged call another index entry).
  properties: {
    /**
     * The partner whose key made the call. No foreign key: its check would lock the partner's row for every
     * batch (a `FOR KEY SHARE` per row), and the writer only ever writes ids a key just proved.
     */
    partnerId: p.text().primary().fieldName("partner_id"),
    environment: p.enum(environments).primary(),
    /** `req_` + ULID: the answer's `X-Request-Id`, its time the call's arrival; the partition key. */
    id: p.text().primary(),
    apiKeyId: p.text().fieldName("api_key_id"),
    method: p.text(),
    /** The route's template or the RPC procedure: never an id or a query. */
    route: p.text(),
    face: p.text(),
    status: p.smallint(),
    errorCode: p.text().nullable().fieldName("error_code"),
    durationUs: p.integer().fieldName("duration_us"),
    /** The error body as the REST face sends it. */
    error: p.json<Record<string, unknown>>().nullable(),
  },
  indexes: [
    // The tenant's failed calls only (status and error code filters), whatever the share of them.
    {
      name: "request_log_failed_by_owner",
      expression:
        "create index request_log_failed_by_owner on request_log (partner_id, environment, id) where status >= 400",
    },
  ],
});

/** A request log row. */
export type RequestLog = InferEntity<typeof RequestLogEntity>;
