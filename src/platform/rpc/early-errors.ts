import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { ApiError } from "../errors.ts";
import { toConnectError } from "./errors.ts";

// Answers the Connect adapter (node-adapter.ts) and the edge give before connect-es reads a request, each in the
// form its protocol says errors.

type NodeRequest = IncomingMessage | Http2ServerRequest;
type NodeResponse = ServerResponse | Http2ServerResponse;

/** The contract's error (with its ErrorInfo) as a Connect unary error body. */
export const connectErrorBytes = (error: ApiError, requestId: string): Uint8Array =>
  errorToJsonBytes(toConnectError(error, requestId, new Headers()), {});

/** A request the adapter refuses before connect-es reads it: 400 `invalid_request` with the contract's ErrorInfo. */
export function invalidRequest(
  req: NodeRequest,
  nodeRes: NodeResponse,
  requestId: string,
  message: string,
): void {
  req.resume();
  const res = nodeRes as ServerResponse;
  const body = connectErrorBytes(new ApiError("invalid_request", message), requestId);
  res.writeHead(400, {
    "content-type": "application/json",
    "content-length": String(body.byteLength),
  });
  res.end(body);
}

/**
 * A refusal made before connect-es sees the request (the per-address limits), as the request's protocol says
 * errors: gRPC and gRPC-Web a trailers-only response (HTTP 200) carrying the status, its message and the
 * contract's `ErrorInfo` in `grpc-status-details-bin`; Connect its JSON error body under the code's HTTP status.
 * The metadata (`retry-after`, `x-request-id`) travels as headers either way.
 */
export function writeRpcError(
  req: NodeRequest,
  nodeRes: NodeResponse,
  error: ApiError,
  requestId: string,
): void {
  req.resume();
  const res = nodeRes as ServerResponse; // the same calls on HTTP/1.1 and HTTP/2
  const type = String(req.headers["content-type"] ?? "");
  const connectError = toConnectError(error, requestId, new Headers());
  const headers: Record<string, string> = {};
  connectError.metadata.forEach((v, k) => {
    headers[k] = v;
  });
  if (/^application\/grpc/i.test(type)) {
    setTrailerStatus(new Headers(), connectError).forEach((v, k) => {
      headers[k] = v;
    });
    headers["content-type"] = type.split(";")[0] ?? "application/grpc";
    if ("stream" in nodeRes && !/^application\/grpc-web/i.test(type)) {
      nodeRes.stream.respond({ ":status": 200, ...headers }, { endStream: true });
      return;
    }
    res.writeHead(200, headers);
    res.end();
    return;
  }
  const body = errorToJsonBytes(connectError, {});
  res.writeHead(error.httpStatus, {
    ...headers,
    "content-type": "application/json",
    "content-length": String(body.byteLength),
  });
  res.end(body);
}

/**
 * An RPC this server does not have, as each protocol says it: gRPC and gRPC-Web answer status 12
 * `UNIMPLEMENTED` in a trailers-only response (HTTP 200); Connect answers 404 with the `unimplemented` code.
 */
export function unimplemented(req: NodeRequest, nodeRes: NodeResponse, path: string): void {
  req.resume();
  const res = nodeRes as ServerResponse; // the same calls on HTTP/1.1 and HTTP/2
  const type = String(req.headers["content-type"] ?? "");
  const message = `The method ${path} does not exist.`;
  if (/^application\/grpc/i.test(type)) {
    const headers = {
      "content-type": type.split(";")[0] ?? "application/grpc",
      "grpc-status": String(Code.Unimplemented),
      "grpc-message": encodeGrpcMessage(message),
    };
    // Trailers-only: one HEADERS frame that ends the stream (gRPC over HTTP/2); gRPC-Web reads them as headers.
    if ("stream" in nodeRes && !/^application\/grpc-web/i.test(type)) {
      nodeRes.stream.respond({ ":status": 200, ...headers }, { endStream: true });
      return;
    }
    res.writeHead(200, headers);
    res.end();
    return;
  }
  const body = errorToJsonBytes(new ConnectError(message, Code.Unimplemented), {});
  res.writeHead(404, { "content-type": "application/json", "content-length": String(body.byteLength) });
  res.end(body);
}

/**
 * `grpc-message` as the gRPC spec encodes it: only bytes outside printable ASCII, and `%` itself, are
 * percent-encoded (connect-es uses `encodeURIComponent`, so clients that follow the spec, grpc-js among them,
 * showed `%3A` and `%20` inside messages).
 */
export function encodeGrpcMessage(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out +=
      byte < 0x20 || byte > 0x7e || byte === 0x25
        ? `%${byte.toString(16).toUpperCase().padStart(2, "0")}`
        : String.fromCharCode(byte);
  }
  return out;
}
