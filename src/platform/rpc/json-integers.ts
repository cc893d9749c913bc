import type { DescMessage, JsonValue } from "@bufbuild/protobuf";
import { ApiError } from "../errors.ts";
import { checkIntegerJson } from "../http/integer-json.ts";
import { type AnyRequest, decodeContent, readBody } from "../http/request-body.ts";

/**
 * How a request's JSON is framed: a Connect unary body is the message; gRPC-Web and Connect streaming bodies
 * are enveloped (a flags byte, a 4-byte length, the message). Binary requests have no spelling to check.
 */
export function jsonFraming(contentType: string): "plain" | "enveloped" | undefined {
  if (/^application\/json\b/i.test(contentType)) return "plain";
  if (/^application\/(grpc-web|grpc|connect)\+json\b/i.test(contentType)) return "enveloped";
  return undefined;
}

/** The messages of a body, as the framing says; an envelope that is compressed or a trailer is not read. */
function* messagesOf(body: Uint8Array, framing: "plain" | "enveloped"): Generator<Uint8Array> {
  if (framing === "plain") {
    yield body;
    return;
  }
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  for (let at = 0; at + 5 <= body.byteLength; ) {
    const flags = view.getUint8(at);
    const length = view.getUint32(at + 1);
    if ((flags & 0x81) === 0) yield body.subarray(at + 5, at + 5 + length);
    at += 5 + length;
  }
}

/**
 * Reads a JSON request's body (as the REST face reads one: at most `maxBytes`, inflated when it is compressed)
 * and checks its integers as the REST face does (platform/http/integer-json.ts): protobuf-es would read
 * `"0x10"` or `" 5"` as 16 or 5 kobo. Returns the body as it came, to hand on, or the refusal (a body too large,
 * an encoding no one reads, a spelling that is not an integer's). JSON that does not parse is left to
 * connect-es, which answers it.
 */
export async function checkJsonIntegers(
  req: AnyRequest,
  input: DescMessage,
  framing: "plain" | "enveloped",
  maxBytes: number,
): Promise<{ body: AsyncIterable<Uint8Array>; refusal?: ApiError }> {
  let raw: Buffer;
  try {
    raw = await readBody(req, maxBytes);
    const body = framing === "plain" ? await decodeContent(req, raw, maxBytes) : raw;
    for (const message of messagesOf(body, framing)) {
      const json = parsed(message);
      if (json !== undefined) checkIntegerJson(input, json);
    }
  } catch (err) {
    if (err instanceof ApiError) return { body: once(EMPTY), refusal: err };
    throw err;
  }
  return { body: once(raw) };
}

const EMPTY = new Uint8Array(0);

/** A message's JSON, or undefined when it does not parse (connect-es answers that). */
function parsed(message: Uint8Array): JsonValue | undefined {
  try {
    return JSON.parse(new TextDecoder().decode(message)) as JsonValue;
  } catch {
    return undefined;
  }
}

/** The body, read once. */
async function* once(body: Uint8Array): AsyncIterable<Uint8Array> {
  yield body;
}
