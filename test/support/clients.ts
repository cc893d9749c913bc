import type { DescService } from "@bufbuild/protobuf";
import {
  create,
  type DescMessage,
  type DescMethodUnary,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { type Client, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { type ErrorInfo, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import { StatusSchema } from "../../gen/google/rpc/status_pb.ts";
import { assertConformsToOpenApi } from "./openapi-check.ts";

/** A REST response, parsed. */
export interface RestResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

/** Calls the REST face with an optional API key. */
export async function rest<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<RestResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  const parsed = text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined;
  // Every answer of the API is checked against its published OpenAPI document.
  if (parsed !== undefined) assertConformsToOpenApi(method, path, res.status, parsed);
  return {
    status: res.status,
    headers: res.headers,
    body: (parsed ?? (text ? JSON.parse(text) : undefined)) as T,
  };
}

function authInterceptor(authorization: string | undefined): Interceptor {
  return (next) => (req) => {
    if (authorization !== undefined) req.header.set("authorization", authorization);
    return next(req);
  };
}

/** A Connect-protocol client (HTTP/1.1, JSON) sending `authorization` as given. */
export function connectClient<S extends DescService>(
  service: S,
  baseUrl: string,
  authorization?: string,
): Client<S> {
  return createClient(
    service,
    createConnectTransport({
      baseUrl,
      httpVersion: "1.1",
      useBinaryFormat: false,
      interceptors: [authInterceptor(authorization)],
    }),
  );
}

/** A gRPC-Web client (HTTP/1.1, binary). */
export function grpcWebClient<S extends DescService>(
  service: S,
  baseUrl: string,
  authorization?: string,
): Client<S> {
  return createClient(
    service,
    createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors: [authInterceptor(authorization)] }),
  );
}

/** The `google.rpc.ErrorInfo` detail of a Connect error, if any. */
export function errorInfoOf(err: unknown): ErrorInfo | undefined {
  return err instanceof ConnectError ? err.findDetails(ErrorInfoSchema)[0] : undefined;
}

/** The outcome of a call made with `@grpc/grpc-js`. */
export type GrpcResult<O extends DescMessage> =
  | { ok: true; message: MessageShape<O>; metadata: grpc.Metadata }
  | {
      ok: false;
      code: grpc.status;
      details: string;
      metadata: grpc.Metadata;
      errorInfo: ErrorInfo | undefined;
    };

/**
 * One unary call with `@grpc/grpc-js`, a gRPC implementation independent of ours, over HTTP/2 cleartext.
 */
export async function grpcUnary<I extends DescMessage, O extends DescMessage>(
  baseUrl: string,
  method: DescMethodUnary<I, O>,
  request: MessageInitShape<I>,
  metadata: Record<string, string> = {},
): Promise<GrpcResult<O>> {
  const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  try {
    return await new Promise<GrpcResult<O>>((resolve) => {
      let headers = new grpc.Metadata();
      const call = client.makeUnaryRequest(
        `/${method.parent.typeName}/${method.name}`,
        (m: MessageInitShape<I>) => Buffer.from(toBinary(method.input, create(method.input, m))),
        (b: Buffer) => fromBinary(method.output, b),
        request,
        md,
        (err, message) => {
          if (err) {
            const bin = err.metadata.get("grpc-status-details-bin")[0];
            const status = bin ? fromBinary(StatusSchema, bin as Buffer) : undefined;
            const info = status?.details
              .map((d) => anyUnpack(d, ErrorInfoSchema))
              .find((d) => d !== undefined);
            resolve({
              ok: false,
              code: err.code,
              details: err.details,
              metadata: err.metadata,
              errorInfo: info,
            });
          } else {
            resolve({ ok: true, message: message as MessageShape<O>, metadata: headers });
          }
        },
      );
      call.on("metadata", (m) => {
        headers = m;
      });
    });
  } finally {
    client.close();
  }
}
