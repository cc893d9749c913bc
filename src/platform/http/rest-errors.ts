import type { ApiError } from "../errors.ts";

/** What the REST face needs of a Node response; HTTP/1.1 and HTTP/2 compatibility responses both have it. */
export interface AnyResponse {
  statusCode: number;
  readonly headersSent: boolean;
  setHeader(name: string, value: string | number): unknown;
  end(chunk: string): unknown;
  destroy(): unknown;
  /**
   * True once the answer was ended. (Not `writableFinished`: an HTTP/2 response says it is finished when its
   * stream was reset before any answer.)
   */
  readonly writableEnded: boolean;
  on(event: "close", listener: () => void): unknown;
  off(event: "close", listener: () => void): unknown;
}

/** Writes a small JSON response. */
export function writeJson(res: AnyResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(text));
  res.statusCode = status;
  res.end(text);
}

/** The REST error body of CONTRACT.md §8. */
export function restErrorBody(err: ApiError, requestId: string): string {
  const body: Record<string, unknown> = { code: err.code, message: err.message, requestId };
  if (err.details) body.details = err.details;
  return JSON.stringify(body);
}

/** Writes an ApiError as the REST error response, with its headers and `Retry-After`. */
export function writeRestError(res: AnyResponse, err: ApiError, requestId: string, extra?: Headers): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = restErrorBody(err, requestId);
  extra?.forEach((v, k) => {
    res.setHeader(k, v);
  });
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  if (err.retryAfterSeconds !== undefined) res.setHeader("retry-after", String(err.retryAfterSeconds));
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.setHeader("x-request-id", requestId);
  res.statusCode = err.httpStatus;
  res.end(body);
}
