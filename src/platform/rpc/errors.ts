import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
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
  logger.error("unhandled error", { err });
  return new ApiError("internal", undefined, { cause: err });
}

/** The Connect/gRPC form of an ApiError: matching code, `ErrorInfo` detail, request id and headers. */
export function toConnectError(err: ApiError, requestId: string, headers: Headers): ConnectError {
  const metadata = new Headers(headers);
  metadata.set("x-request-id", requestId);
  for (const [k, v] of Object.entries(err.headers)) metadata.set(k, v);
  if (err.retryAfterSeconds !== undefined) metadata.set("retry-after", String(err.retryAfterSeconds));
  const info: Record<string, string> = { requestId };
  if (err.details) info.details = JSON.stringify(err.details);
  return new ConnectError(
    err.message,
    connectCode[errorCodes[err.code].rpc],
    metadata,
    [{ desc: ErrorInfoSchema, value: { reason: err.code, domain: ERROR_DOMAIN, metadata: info } }],
    err,
  );
}
