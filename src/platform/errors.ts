/**
 * The one domain error type (CONTRACT.md §8). Services throw `ApiError`; the edge maps it in exactly one
 * place to the REST body (`platform/http/rest-errors.ts`) and to a Connect/gRPC error with a
 * `google.rpc.ErrorInfo` detail (`platform/rpc/errors.ts`), so every face reports the same `code`.
 */

/** gRPC status names, as the Connect and gRPC faces report them. */
export type RpcStatus =
  | "invalid_argument"
  | "unauthenticated"
  | "permission_denied"
  | "not_found"
  | "already_exists"
  | "aborted"
  | "failed_precondition"
  | "resource_exhausted"
  | "unimplemented"
  | "internal"
  | "unavailable";

interface CodeSpec {
  readonly http: number;
  readonly rpc: RpcStatus;
  readonly message: string;
}

/** Every error code the API answers with, its HTTP status, its gRPC status and a default message. */
export const errorCodes = {
  invalid_request: { http: 400, rpc: "invalid_argument", message: "The request is malformed." },
  invalid_argument: { http: 400, rpc: "invalid_argument", message: "A parameter is not valid." },
  invalid_event_type: {
    http: 400,
    rpc: "invalid_argument",
    message: "Unknown event type; use one of the six types, * or a prefix wildcard.",
  },
  invalid_ledger_window: {
    http: 400,
    rpc: "invalid_argument",
    message: "ledger_window_days must be a whole number of days from 1 to 365.",
  },
  invalid_scope: { http: 400, rpc: "invalid_argument", message: "Unknown consent scope." },
  invalid_phone_number: {
    http: 400,
    rpc: "invalid_argument",
    message: "The phone number must be in E.164 form, such as +2348012345678.",
  },
  idempotency_key_required: {
    http: 400,
    rpc: "invalid_argument",
    message: "This operation needs an Idempotency-Key header.",
  },
  unauthenticated: {
    http: 401,
    rpc: "unauthenticated",
    message: "Send your API key as `Authorization: Bearer sk_…`.",
  },
  invalid_api_key: { http: 401, rpc: "unauthenticated", message: "The API key is not valid." },
  api_key_revoked: { http: 401, rpc: "unauthenticated", message: "The API key has been revoked." },
  api_key_expired: {
    http: 401,
    rpc: "unauthenticated",
    message: "The API key was rolled and its overlap has ended; use the new key.",
  },
  permission_denied: {
    http: 403,
    rpc: "permission_denied",
    message: "This credential may not perform this action.",
  },
  not_found: { http: 404, rpc: "not_found", message: "No such resource." },
  consent_link_gone: {
    http: 410,
    rpc: "failed_precondition",
    message: "This consent link has been used, declined or has expired.",
  },
  mandate_gone: {
    http: 410,
    rpc: "failed_precondition",
    message: "This repayment mandate has been answered, has expired or was cancelled.",
  },
  consent_required: {
    http: 403,
    rpc: "permission_denied",
    message: "The user has not given this partner consent in this environment; send a consent link.",
  },
  consent_revoked: {
    http: 403,
    rpc: "permission_denied",
    message: "The user's consent has been revoked; read the consent, then ask again with a consent link.",
  },
  consent_expired: {
    http: 403,
    rpc: "permission_denied",
    message: "The user's consent has expired; ask again with a consent link.",
  },
  ledger_window_exceeds_consent: {
    http: 403,
    rpc: "permission_denied",
    message: "ledger_window_days is larger than the consent's maxLedgerWindowDays.",
  },
  sandbox_only: { http: 403, rpc: "permission_denied", message: "This endpoint is for sandbox keys only." },
  method_not_allowed: {
    http: 405,
    rpc: "unimplemented",
    message: "This path does not support that HTTP method.",
  },
  conflict: { http: 409, rpc: "aborted", message: "The request conflicts with the resource's state." },
  idempotency_key_in_use: {
    http: 409,
    rpc: "aborted",
    message: "A request with this Idempotency-Key is still being processed; retry shortly.",
  },
  api_key_exists: {
    http: 409,
    rpc: "already_exists",
    message: "The partner already has an active key in this environment; roll it instead.",
  },
  payload_too_large: { http: 413, rpc: "resource_exhausted", message: "The request body is too large." },
  unsupported_media_type: {
    http: 415,
    rpc: "invalid_argument",
    message: "Send the body as application/json.",
  },
  validation_failed: { http: 422, rpc: "invalid_argument", message: "Some fields are not valid." },
  idempotency_key_reused: {
    http: 422,
    rpc: "invalid_argument",
    message: "This Idempotency-Key was used with a different request.",
  },
  rate_limited: { http: 429, rpc: "resource_exhausted", message: "Too many requests; retry later." },
  too_many_concurrent_reads: {
    http: 429,
    rpc: "resource_exhausted",
    message: "Too many snapshot reads are in flight for this API key; retry after Retry-After.",
  },
  user_daily_disbursement_limit: {
    http: 429,
    rpc: "resource_exhausted",
    message:
      "This user has reached today's limit of disbursements from you (Lagos day); retry after midnight in Lagos.",
  },
  webhook_sends_rate_limited: {
    http: 429,
    rpc: "resource_exhausted",
    message: "Too many webhook test sends and replays; retry after Retry-After seconds.",
  },
  internal: { http: 500, rpc: "internal", message: "Something went wrong on our side." },
  unavailable: { http: 503, rpc: "unavailable", message: "The service is temporarily unavailable." },
} as const satisfies Record<string, CodeSpec>;

/** A contract error code. */
export type ErrorCode = keyof typeof errorCodes;

/** Options for an {@link ApiError}. */
export interface ApiErrorOptions {
  /** Machine-readable extras, such as `fields` for `validation_failed`. Never secrets or personal data. */
  details?: Record<string, unknown>;
  /** Seconds a client should wait before retrying (429, 503): sent as `Retry-After`. */
  retryAfterSeconds?: number;
  /** The underlying failure, logged but never sent. */
  cause?: unknown;
  /** Response headers that belong with this error (rate-limit headers, for example). */
  headers?: Record<string, string>;
}

/** An error a partner is meant to see: a contract code, a human message and optional details. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, options: ApiErrorOptions = {}) {
    super(message ?? errorCodes[code].message, { cause: options.cause });
    this.code = code;
    this.details = options.details;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.headers = options.headers ?? {};
  }

  /** The HTTP status of this error's code. */
  get httpStatus(): number {
    return errorCodes[this.code].http;
  }
}

/** A `validation_failed` error listing each bad field with a reason. */
export function validationFailed(fields: Record<string, string>, message?: string): ApiError {
  return new ApiError("validation_failed", message, { details: { fields } });
}

/** True when `err` is an ApiError. */
export function isApiError(err: unknown): err is ApiError {
  return err instanceof ApiError;
}
