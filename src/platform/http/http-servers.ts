import http from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import { expectationFailed, listenerError, rawHttp1Error } from "./raw-errors.ts";

/** A request handler that serves both HTTP/1.1 and HTTP/2 requests. */
export type Handler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** Limits against slow clients, on both protocols. */
export interface ListenerTimeouts {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

/** The status line and contract error for a request Node could not parse. */
function unparsedRequestError(err: NodeJS.ErrnoException): [number, string, string, string] {
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return [
      431,
      "Request Header Fields Too Large",
      "headers_too_large",
      "The request headers are too large (16 KiB at most).",
    ];
  }
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return [408, "Request Timeout", "request_timeout", "The request took too long to arrive."];
  }
  return [400, "Bad Request", "invalid_request", "The request is not valid HTTP."];
}

/**
 * The HTTP/1.1 server of a listener. It never listens itself: connections the listener found to be HTTP/1.1
 * are handed to it with its "connection" event.
 */
export function createHttp1Server(
  limits: ListenerTimeouts,
  handler: Handler,
  onClientError: (err: Error) => void,
): http.Server {
  const h1 = http.createServer(
    {
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: Math.max(limits.requestTimeoutMs, limits.headersTimeoutMs),
      // How often Node looks for connections past those limits (its default, 30 s, would let a slow client
      // hold a socket for up to 30 s more).
      connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
      maxHeaderSize: 16 * 1024,
      // A request without Host reaches the service's handler, which answers it in the contract's shape.
      requireHostHeader: false,
    },
    handler,
  );
  h1.on("checkExpectation", expectationFailed);
  // h1 never listens itself (connections arrive from the sniffer), but its connection tracking, which
  // enforces headersTimeout/requestTimeout against slow clients and lets idle keep-alive sockets be closed
  // on shutdown, starts on "listening".
  h1.emit("listening");
  // A request Node cannot parse still gets the contract's error body.
  h1.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !(socket as net.Socket & { _httpMessage?: unknown })._httpMessage) {
      const [status, reason, code, message] = unparsedRequestError(err);
      socket.end(rawHttp1Error(status, reason, code, message));
    } else socket.destroy();
    onClientError(err);
  });
  return h1;
}

/** The HTTP/2 server of a listener; like the HTTP/1.1 one, it is handed its connections. */
export function createHttp2Server(limits: ListenerTimeouts, handler: Handler): http2.Http2Server {
  const h2 = http2.createServer({ maxSessionMemory: 10, settings: { maxConcurrentStreams: 100 } }, handler);
  // HTTP/2 streams have no requestTimeout of their own: a stream whose request has not fully arrived by the
  // deadline (a body trickled a byte at a time) is answered 408 and closed, as HTTP/1.1 would be.
  h2.on("stream", (stream) => {
    const deadline = setTimeout(() => {
      if (stream.readableEnded || stream.destroyed) return;
      if (!stream.headersSent) {
        const { headers, body } = listenerError("request_timeout", "The request took too long to arrive.");
        stream.respond({ ":status": 408, ...headers });
        stream.end(body);
      }
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, limits.requestTimeoutMs);
    deadline.unref();
    stream.once("close", () => clearTimeout(deadline));
  });
  return h2;
}
