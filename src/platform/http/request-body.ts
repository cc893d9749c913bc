import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { promisify } from "node:util";
import zlib from "node:zlib";
import { ApiError } from "../errors.ts";

/** Either kind of Node request the partner listener hands out. */
export type AnyRequest = IncomingMessage | Http2ServerRequest;

const EMPTY = Buffer.alloc(0);

const inflaters: Record<string, (buf: Buffer, o: zlib.ZlibOptions & zlib.BrotliOptions) => Promise<Buffer>> =
  {
    gzip: promisify(zlib.gunzip),
    "x-gzip": promisify(zlib.gunzip),
    deflate: promisify(zlib.inflate),
    br: promisify(zlib.brotliDecompress),
  };

/**
 * A body sent with `Content-Encoding` gzip, deflate or br, decompressed to at most `limit` bytes: a body that
 * inflates past it (a decompression bomb) is `413 payload_too_large`, found without ever holding more than the
 * limit; another encoding is `415`; bytes that do not decompress are `400`.
 */
export async function decodeContent(req: AnyRequest, raw: Buffer, limit: number): Promise<Buffer> {
  const encoding = String(req.headers["content-encoding"] ?? "identity")
    .trim()
    .toLowerCase();
  if (encoding === "identity" || encoding === "" || raw.length === 0) return raw;
  const inflate = inflaters[encoding];
  if (!inflate)
    throw new ApiError(
      "unsupported_media_type",
      "Send the body as application/json, uncompressed or with Content-Encoding gzip, deflate or br.",
    );
  try {
    return await inflate(raw, { maxOutputLength: limit });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE")
      throw new ApiError(
        "payload_too_large",
        `The request body is larger than ${limit} bytes once decompressed.`,
      );
    throw new ApiError("invalid_request", `The request body is not valid ${encoding} data.`);
  }
}

/** Reads the body up to a limit; rejects with `payload_too_large` beyond it. */
export async function readBody(req: AnyRequest, limit: number): Promise<Buffer> {
  // HTTP/1.1 without Content-Length or Transfer-Encoding has no body; HTTP/2 may stream one without either.
  const h = req.headers;
  if (h["content-length"] === undefined && h["transfer-encoding"] === undefined && req.httpVersionMajor < 2)
    return EMPTY;
  if (req.readableEnded) return EMPTY;
  const declared = Number(h["content-length"] ?? 0);
  if (declared > limit) throw new ApiError("payload_too_large");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new ApiError("payload_too_large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Whether a request's body is still to come: HTTP/1.1 with a length or chunks not yet read, or any HTTP/2
 * stream not yet ended.
 */
export function bodyToCome(req: AnyRequest): boolean {
  const h = req.headers;
  return (
    !req.readableEnded &&
    (req.httpVersionMajor >= 2 || h["content-length"] !== undefined || h["transfer-encoding"] !== undefined)
  );
}
