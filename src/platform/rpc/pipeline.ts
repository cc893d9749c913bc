import type { DescMessage, DescMethod, Message } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";

/** One call as the edge sees it, whichever face (REST, Connect, gRPC-Web, gRPC) it came in on. */
export interface EdgeCall {
  method: DescMethod;
  requestHeader: Headers;
  values: ContextValues;
  /** Headers to send with the response, success or error. */
  responseHeader: Headers;
}

/**
 * The cross-cutting pipeline around every handler (src/edge/ builds one per listener). The Connect interceptor
 * and the REST transcoder both call it, so the faces authenticate, limit, deduplicate and fail identically.
 */
export interface Edge {
  /** Before the request body is read: authentication and the rate limit. */
  admit(call: EdgeCall): Promise<void>;
  /**
   * After the body has arrived, where `admit` ran before it was read (the REST face): the credentials are
   * checked again, so a key revoked or rolled while a body was on its way (it may take the whole request
   * time-out) does not act. A key still cached makes it a lookup in memory.
   */
  confirm?(call: EdgeCall): Promise<void>;
  /** Around the handler, with the decoded and validated request: the unit of work, idempotency for writes. */
  invoke(call: EdgeCall, request: Message, handler: () => Promise<unknown>): Promise<unknown>;
}

/**
 * Checks a decoded request against its message's rules; throws the contract's error when any is broken. Both
 * faces run it after `admit` and before `invoke`, so a refused request costs no database round trip and is
 * never stored as an answer to replay.
 */
export type RequestValidator = (schema: DescMessage, request: Message) => void;

/** The bearer token of an `Authorization` header, or undefined ("" for a header that is not a bearer token). */
export function bearer(header: Headers): string | undefined {
  const value = header.get("authorization");
  if (!value) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1] : "";
}
