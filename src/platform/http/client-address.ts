import type http2 from "node:http2";

/**
 * The address of each HTTP/2 session's connection. The listener reads a connection's first bytes to tell
 * HTTP/2 from HTTP/1.1 and hands HTTP/2 ones over as a stream that replays them; Node wraps such a stream in a
 * socket of its own that knows no address, so a request's `socket.remoteAddress` is empty on HTTP/2.
 */
const sessionAddress = new WeakMap<http2.Http2Session, string>();

/** Records the address of the connection a session reads from (platform/http/protocol-sniffing.ts). */
export function rememberSessionAddress(session: http2.Http2Session, address: string | undefined): void {
  if (address !== undefined) sessionAddress.set(session, address);
}

/** A request as far as its client's address goes, on HTTP/1.1 or HTTP/2. */
export interface AddressedRequest {
  socket?: { remoteAddress?: string } | null;
  stream?: { session?: http2.Http2Session };
}

/** The client's address of a request, on either protocol ("" when it is gone). */
export function clientAddressOf(req: AddressedRequest): string {
  const session = req.stream?.session;
  const address = session ? sessionAddress.get(session) : undefined;
  return address ?? req.socket?.remoteAddress ?? "";
}
