import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { base64Decode } from "@bufbuild/protobuf/wire";
import type { ContextValues } from "@connectrpc/connect";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  createConnectRouter,
} from "@connectrpc/connect";
import type {
  UniversalHandler,
  UniversalServerRequest,
  UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import { ApiError } from "../errors.ts";
import {
  connectErrorBytes,
  encodeGrpcMessage,
  invalidRequest,
  unimplemented,
  writeRpcError,
} from "./early-errors.ts";

export { encodeGrpcMessage } from "./early-errors.ts";

import { checkJsonIntegers, jsonFraming } from "./json-integers.ts";

type NodeRequest = IncomingMessage | Http2ServerRequest;
type NodeResponse = ServerResponse | Http2ServerResponse;

/** Options for {@link connectAdapter}. */
export interface ConnectAdapterOptions extends ConnectRouterOptions {
  routes(router: ConnectRouter): void;
  contextValues(req: NodeRequest): ContextValues;
  fallback(req: NodeRequest, res: NodeResponse): void;
  /** The request id of a request, for errors written here. */
  requestIdOf(req: NodeRequest): string;
  onError(message: string, err: unknown): void;
}

const PARSE_ERROR = /^parse binary: /;
/** The path of an RPC: `/package.Service/Method`. */
const PROCEDURE_PATH = /^\/[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+\/[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A Connect GET whose `message` is not base64 though `base64=1` says it is: connect-es's decoder throws a plain
 * error there, which it answers as `internal` (500, with nothing logged). It is the client's fault.
 */
function undecodableGet(url: string, q: number): boolean {
  if (q === -1 || !url.includes("base64=1", q)) return false;
  const query = new URLSearchParams(url.slice(q + 1));
  if (query.get("base64") !== "1") return false;
  try {
    base64Decode(query.get("message") ?? "");
    return false;
  } catch {
    return true;
  }
}

/**
 * `connectNodeAdapter`, with one correction: connect-es reports a request body that is not a valid binary
 * protobuf message as `internal` (its parser is shared with clients, where that would be the server's
 * fault). From a client it is the client's fault: it becomes `invalid_argument`, with the contract's
 * `ErrorInfo` on Connect, and gRPC status 3 on gRPC.
 */
export function connectAdapter(options: ConnectAdapterOptions) {
  options.acceptCompression ??= [compressionGzip, compressionBrotli];
  const router = createConnectRouter(options);
  options.routes(router);
  const paths = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req: NodeRequest, res: NodeResponse): void => {
    const url = req.url ?? "";
    const q = url.indexOf("?");
    const handler = paths.get(q === -1 ? url : url.slice(0, q));
    if (!handler) {
      if (req.method === "POST" && PROCEDURE_PATH.test(q === -1 ? url : url.slice(0, q))) {
        unimplemented(req, res, q === -1 ? url : url.slice(0, q));
        return;
      }
      options.fallback(req, res);
      return;
    }
    if (req.method === "GET" && undecodableGet(url, q)) {
      invalidRequest(
        req,
        res,
        options.requestIdOf(req),
        "The message query parameter is not base64 (base64=1).",
      );
      return;
    }
    let uReq: ReturnType<typeof universalRequestFromNodeRequest>;
    try {
      // connect-node declares its own request and response types for the same Node objects (library interop).
      uReq = universalRequestFromNodeRequest(
        req as never,
        res as never,
        undefined,
        options.contextValues(req),
      );
    } catch {
      // connect-node builds a URL from the Host header and throws (outside any promise) when it does not parse:
      // one such request would otherwise stop the process.
      invalidRequest(req, res, options.requestIdOf(req), "The Host header is not a valid host.");
      return;
    }
    void serve(handler, uReq, req, res, options);
  };
}

/**
 * Hands a request to connect-es: a JSON one once its integers are checked as REST checks them, an empty Connect
 * JSON body as `{}`; its answer, or the client's fault, back to Node.
 */
async function serve(
  handler: UniversalHandler,
  uReq: UniversalServerRequest,
  req: NodeRequest,
  res: NodeResponse,
  options: ConnectAdapterOptions,
): Promise<void> {
  const requestId = options.requestIdOf(req);
  try {
    const type = String(req.headers["content-type"] ?? "");
    const framing = jsonFraming(type);
    if (framing && req.method === "POST") {
      const maxBytes = options.readMaxBytes ?? 0xffffffff;
      const checked = await checkJsonIntegers(req, handler.method.input, framing, maxBytes);
      if (checked.refusal) return writeRpcError(req, res, checked.refusal, requestId);
      uReq.body = checked.body;
    }
    if (framing === "plain") {
      uReq.body = emptyAsObject(uReq.body as AsyncIterable<Uint8Array>);
      // connect-es holds a body to its Content-Length: an announced empty one no longer is.
      if (uReq.header.get("content-length") === "0") uReq.header.delete("content-length");
    }
    const uRes = await clientFault(await handler(uReq), requestId);
    // The request id in the response's headers, once: over HTTP/2 connect-node sends its own headers, not those set
    // on the response on arrival (edge/request-id.ts).
    uRes.header ??= new Headers();
    uRes.header.set("x-request-id", requestId);
    await universalResponseToNodeResponse(uRes, res as never);
  } catch (reason) {
    if (ConnectError.from(reason).code === Code.Aborted) return;
    options.onError(`handler for ${handler.service.typeName}/${handler.method.name} failed`, reason);
  }
}

/**
 * A Connect JSON request with an empty body, as many HTTP clients send for a method with nothing to say, is read
 * as `{}` (an empty body is not valid JSON to connect-es). The body passes through unchanged otherwise.
 */
async function* emptyAsObject(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let empty = true;
  for await (const chunk of body) {
    if (chunk.byteLength > 0) empty = false;
    yield chunk;
  }
  if (empty) yield new TextEncoder().encode("{}");
}

function respecGrpcMessage(uRes: UniversalServerResponse): UniversalServerResponse {
  for (const headers of [uRes.header, uRes.trailer]) {
    const raw = headers?.get("grpc-message");
    if (!headers || raw === null || raw === undefined) continue;
    let message = raw;
    try {
      message = decodeURIComponent(raw);
    } catch {
      // not percent-encoded as connect-es does: leave it to be encoded as it is
    }
    headers.set("grpc-message", encodeGrpcMessage(message));
  }
  return uRes;
}

async function clientFault(
  uRes: UniversalServerResponse,
  requestId: string,
): Promise<UniversalServerResponse> {
  return respecGrpcMessage(await fixFaults(uRes, requestId));
}

async function fixFaults(uRes: UniversalServerResponse, requestId: string): Promise<UniversalServerResponse> {
  // gRPC: the status travels in the trailers.
  const status = uRes.trailer?.get("grpc-status");
  if (
    status === String(Code.Internal) &&
    PARSE_ERROR.test(decodeURIComponent(uRes.trailer?.get("grpc-message") ?? ""))
  ) {
    uRes.trailer?.set("grpc-status", String(Code.InvalidArgument));
    uRes.trailer?.set("grpc-message", encodeURIComponent("The request is not a valid protobuf message."));
    return uRes;
  }
  // Connect: a unary error is a small JSON body with an HTTP status.
  if (uRes.status < 400 || !uRes.body || !uRes.header?.get("content-type")?.startsWith("application/json"))
    return uRes;
  const chunks: Buffer[] = [];
  for await (const chunk of uRes.body as AsyncIterable<Uint8Array | string>)
    chunks.push(Buffer.from(chunk as Uint8Array));
  const bytes = Buffer.concat(chunks);
  let error: { code?: string; message?: string } = {};
  try {
    error = JSON.parse(bytes.toString("utf8"));
  } catch {
    // not an error body: leave it as it was
  }
  const parseFailure = error.code === "internal" && PARSE_ERROR.test(error.message ?? "");
  // A JSON body connect-es could not decode: the same status, with the contract's ErrorInfo added.
  const decodeFailure = error.code === "invalid_argument" && !("details" in error);
  // connect-es's own resource_exhausted (no ErrorInfo: ours always carry one) is a message past readMaxBytes,
  // as sent or once decompressed (a decompression bomb): 413 payload_too_large, not the protocol's 429, which
  // would tell a client to retry what can never succeed.
  const tooLarge = error.code === "resource_exhausted" && !("details" in error);
  if (tooLarge) {
    const fixed = connectErrorBytes(new ApiError("payload_too_large", error.message), requestId);
    uRes.header?.set("content-length", String(fixed.byteLength));
    return {
      ...uRes,
      status: 413,
      body: (async function* () {
        yield fixed;
      })(),
    };
  }
  if (!parseFailure && !decodeFailure) {
    return {
      ...uRes,
      body: (async function* () {
        yield new Uint8Array(bytes);
      })(),
    };
  }
  const fixed = connectErrorBytes(
    new ApiError(
      "invalid_request",
      parseFailure ? "The request is not a valid protobuf message." : error.message,
    ),
    requestId,
  );
  uRes.header?.set("content-length", String(fixed.byteLength));
  return {
    ...uRes,
    status: 400,
    body: (async function* () {
      yield fixed;
    })(),
  };
}
