import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { ApiError, type ErrorCode, errorCodes, type RpcStatus } from "../errors.ts";
import type { Logger } from "../logger.ts";

/** The domain in every `google.rpc.ErrorInfo` we send. */
export const ERROR_DOMAIN = "partner-api";

const connectCode: Record<RpcStatus, Code> = {
  invalid_argument: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  aborted: Code.Aborted,
  failed_precondition: Code.FailedPrecondition,
  resource_exhausted: Code.ResourceExhausted,
  unimplemented: Code.Unimplemented,
  internal: Code.Internal,
  unavailable: Code.Unavailable,
};

/** The contract code for an error Connect raised itself (malformed request, deadline, ...). */
const fromConnect: Partial<Record<Code, ErrorCode>> = {
  [Code.InvalidArgument]: "invalid_request",
  [Code.Unauthenticated]: "unauthenticated",
  [Code.PermissionDenied]: "permission_denied",
  [Code.NotFound]: "not_found",
  [Code.Unimplemented]: "not_found",
  [Code.ResourceExhausted]: "payload_too_large",
  [Code.Unavailable]: "unavailable",
  [Code.DeadlineExceeded]: "unavailable",
  [Code.Canceled]: "unavailable",
};

/**
 * Turns anything thrown below the edge into the error partners see. An {@link ApiError} keeps its code; a
 * ConnectError raised by the protocol layer gets the nearest contract code; anything else is logged with
 * its cause and answered `internal`, without detail.
 */
export function toApiError(err: unknown, logger: Logger): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ConnectError) {
    const info = err.findDetails(ErrorInfoSchema)[0];
    if (info && info.reason in errorCodes) return new ApiError(info.reason as ErrorCode, err.rawMessage);
    const code = fromConnect[err.code];
    if (code) return new ApiError(code, err.rawMessage || undefined, { cause: err });
  }
  // PostgreSQL refuses text it cannot store (a NUL character, a lone surrogate): the input's fault, not ours.
  const pgCode = (err as { code?: unknown })?.code;
  if (pgCode === "22021" || pgCode === "22P05") {
    return new ApiError("invalid_argument", "Text may not contain NUL or invalid Unicode characters.", {
      cause: err,
    });
  }
  // Two requests changed the same rows in opposite orders and PostgreSQL chose this one to give way: nothing
  // of it committed, so a retry is safe. A 409 with Retry-After says so (it is no fault of the service).
  if (hasSqlState(err, "40P01") || hasSqlState(err, "40001")) {
    logger.warn("gave way to a concurrent change", { err: (err as Error).message });
    return new ApiError("conflict", "A concurrent change to the same resource won; retry.", {
      retryAfterSeconds: 1,
      cause: err,
    });
  }
  // The database is unreachable or restarting: the request may be retried (it ran in a transaction that
  // did not commit), so say so instead of blaming ourselves with a 500.
  if (isPoolExhausted(err)) {
    logger.warn("no database connection free in time", { err: (err as Error).message });
    return new ApiError("unavailable", "The service is busy; retry shortly.", {
      retryAfterSeconds: 1,
      cause: err,
    });
  }
  if (isDatabaseUnavailable(err)) {
    logger.warn("database unavailable", { err: (err as Error).message });
    return new ApiError("unavailable", "The service cannot reach its database; retry shortly.", {
      retryAfterSeconds: 1,
      cause: err,
    });
  }
  logger.error("unhandled error", { err });
  return new ApiError("internal", undefined, { cause: err });
}

/** True when the error, or one of its causes, carries this PostgreSQL SQLSTATE. */
function hasSqlState(err: unknown, state: string): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e.code === state) return true;
    e = e.cause as typeof e;
  }
  return false;
}

/**
 * True when no pooled connection came free within DB_ACQUIRE_TIMEOUT_MS (pg-pool's wording), or PostgreSQL
 * cancelled a statement or a transaction at its time-out, or a lock at `lock_timeout`: the request did not
 * commit and may be retried.
 */
export function isPoolExhausted(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    depth++
  ) {
    if (e.code === "57014" || e.code === "25P03" || e.code === "55P03") return true;
    if (typeof e.message === "string" && e.message.includes("timeout exceeded when trying to connect"))
      return true;
    e = e.cause as typeof e;
  }
  return false;
}

/**
 * The server shutting down or starting (57P01-57P03), too many connections (53300), and every connection
 * exception (class 08): PgBouncer answers with 08P01 when it lost its server connection (`server conn
 * crashed?`), cannot log in to the server yet, or a client waited past its `query_wait_timeout`.
 */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300"]);
const isConnectionException = (code: string) => code.startsWith("08") && code.length === 5;
const UNAVAILABLE_NETWORK = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH"]);

/** True for errors that mean the database could not be reached or went away mid-request. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    depth++
  ) {
    if (
      typeof e.code === "string" &&
      (UNAVAILABLE_SQLSTATES.has(e.code) || isConnectionException(e.code) || UNAVAILABLE_NETWORK.has(e.code))
    )
      return true;
    if (
      typeof e.message === "string" &&
      /Connection terminated|connection timeout|Client has encountered a connection error/i.test(e.message)
    )
      return true;
    e = e.cause as typeof e;
  }
  return false;
}

/** The Connect/gRPC form of an ApiError: matching code, `ErrorInfo` detail, request id and headers. */
export function toConnectError(err: ApiError, requestId: string, headers: Headers): ConnectError {
  const metadata = new Headers(headers);
  metadata.set("x-request-id", requestId);
  for (const [k, v] of Object.entries(err.headers)) metadata.set(k, v);
  if (err.retryAfterSeconds !== undefined) metadata.set("retry-after", String(err.retryAfterSeconds));
  const info: Record<string, string> = { requestId };
  if (err.details) info.details = JSON.stringify(err.details);
  const details: ConstructorParameters<typeof ConnectError>[3] = [
    { desc: ErrorInfoSchema, value: { reason: err.code, domain: ERROR_DOMAIN, metadata: info } },
  ];
  // Field errors (`details.fields`, as on REST) also as the standard google.rpc.BadRequest, which gRPC
  // libraries and tools know how to show.
  const fields = err.details?.fields;
  if (fields && typeof fields === "object" && !Array.isArray(fields)) {
    const fieldViolations = Object.entries(fields as Record<string, unknown>).map(([field, description]) => ({
      field,
      description: String(description),
    }));
    if (fieldViolations.length > 0) details.push({ desc: BadRequestSchema, value: { fieldViolations } });
  }
  return new ConnectError(err.message, connectCode[errorCodes[err.code].rpc], metadata, details, err);
}
