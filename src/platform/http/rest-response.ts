import { create, type DescMessage, type JsonValue, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import type { AnyResponse } from "./rest-errors.ts";
import type { Route } from "./rest-routes.ts";

const jsonWrite = { alwaysEmitImplicit: true } as const;

/** google.api.HttpBody: the handler's bytes are the response, as they are. */
function writeHttpBody(res: AnyResponse, responseHeader: Headers, output: unknown): void {
  const body = output as { contentType: string; data: Uint8Array };
  responseHeader.forEach((v, k) => {
    res.setHeader(k, v);
  });
  res.setHeader("content-type", body.contentType);
  res.setHeader("content-length", body.data.byteLength);
  res.statusCode = 200;
  // Both responses take bytes; TypeScript cannot pick one `end` overload for their union.
  res.end(Buffer.from(body.data.buffer, body.data.byteOffset, body.data.byteLength) as never);
}

/** The response message as JSON: the whole message, or the field the rule's `response_body` names. */
function responseJson(route: Route, output: unknown): string {
  const message = create(route.method.output, output as MessageInitShape<DescMessage>);
  // A handler that returns the very message it returned before (a cached, immutable response) gets
  // the JSON made the first time.
  let payload = output === message ? route.memo.get(message) : undefined;
  if (payload === undefined) {
    const out = toJson(route.method.output, message, jsonWrite) as Record<string, JsonValue>;
    payload = JSON.stringify(route.responseField ? (out[route.responseField] ?? null) : out);
    if (output === message) route.memo.set(message, payload);
  }
  return payload;
}

/** Writes a handler's result as the 200 response, with the headers the handler set. */
export function writeRestResponse(
  res: AnyResponse,
  route: Route,
  responseHeader: Headers,
  output: unknown,
): void {
  if (route.method.output.typeName === "google.api.HttpBody") {
    writeHttpBody(res, responseHeader, output);
    return;
  }
  const payload = responseJson(route, output);
  responseHeader.forEach((v, k) => {
    res.setHeader(k, v);
  });
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.statusCode = 200;
  res.end(payload);
}
