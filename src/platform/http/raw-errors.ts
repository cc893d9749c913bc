import type http from "node:http";
import { newId } from "../ids.ts";

/** Headers every answer the listener writes itself carries, as the service's own answers do. */
const COMMON = { "content-type": "application/json; charset=utf-8", "x-content-type-options": "nosniff" };

/** The contract's error body, with a fresh request id (the request never reached the service's handler). */
function errorBody(code: string, message: string): { requestId: string; body: string } {
  const requestId = newId("req");
  return { requestId, body: JSON.stringify({ code, message, requestId }) };
}

/** A whole HTTP/1.1 error response as bytes, for a socket whose request Node could not parse. */
export function rawHttp1Error(status: number, reason: string, code: string, message: string): string {
  const { requestId, body } = errorBody(code, message);
  const headers = { ...COMMON, "x-request-id": requestId, connection: "close" };
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  return `HTTP/1.1 ${status} ${reason}\r\n${lines.join("")}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** The headers and body of an error the listener answers on an HTTP/2 stream or an HTTP/1.1 response. */
export function listenerError(
  code: string,
  message: string,
): { headers: Record<string, string>; body: string } {
  const { requestId, body } = errorBody(code, message);
  return { headers: { ...COMMON, "x-request-id": requestId }, body };
}

/** `Expect` other than `100-continue`: 417 in the contract's shape (Node's own answer has no body or ids). */
export function expectationFailed(_req: http.IncomingMessage, res: http.ServerResponse): void {
  const { headers, body } = listenerError("invalid_request", "Only `Expect: 100-continue` is understood.");
  res
    .writeHead(417, { ...headers, "content-length": Buffer.byteLength(body), connection: "close" })
    .end(body);
}
