import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { Duplex } from "node:stream";
import { addressKey } from "../ip.ts";
import type { Logger } from "../logger.ts";
import { type ConnectionCaps, type ConnectionRefusal, createConnectionLimits } from "./connection-limits.ts";
import { createIdleConnections } from "./idle-connections.ts";
import { expectationFailed, listenerError, rawHttp1Error } from "./raw-errors.ts";

/** A request handler that serves both HTTP/1.1 and HTTP/2 requests. */
export type Handler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** A bound listener. */
export interface Listener {
  readonly port: number;
  readonly host: string;
  /** Connections open now (refused ones never count). */
  readonly openConnections: number;
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), then closes what is left. */
  close(graceMs?: number): Promise<void>;
}

/** Options for {@link listen}. */
export interface ListenOptions {
  host: string;
  port: number;
  handler: Handler;
  logger: Logger;
  name: string;
  /** Limits against slow clients (defaults: 20 s for headers, 60 s for a request, 65 s idle keep-alive). */
  timeouts?: { headersTimeoutMs: number; requestTimeoutMs: number; keepAliveTimeoutMs: number };
  /** Caps on open connections, in all and per client address. */
  connections: ConnectionCaps;
  /** Told of each connection refused by those caps (for a metric). */
  onRefused?: (reason: ConnectionRefusal) => void;
  /** Told of each connection that had sent nothing, closed at the listener's cap to admit a new one. */
  onEvicted?: () => void;
}

/** How often, at most, a listener logs that a connection cap was reached (the metrics count every case). */
const CAP_LOG_INTERVAL_MS = 60_000;

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * Closes a socket with a reset, which leaves no TIME_WAIT on this side. One already shutting down (its client
 * hung up, so it is ending too) is closed plainly: Node cannot reset it (EINVAL), and would drop its
 * descriptor without closing it or ever emitting "close".
 */
function reset(socket: net.Socket): void {
  if (socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

/**
 * The HTTP/2 session reads from the socket's native handle, past anything pushed back with `unshift`, so
 * an HTTP/2 connection whose first bytes we already read is handed over as a stream that replays them.
 */
function replaying(socket: net.Socket, head: Buffer): Duplex {
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk, encoding, callback) {
      socket.write(chunk, encoding, callback);
    },
    final(callback) {
      socket.end(callback);
    },
    destroy(err, callback) {
      socket.destroy(err ?? undefined);
      callback(err);
    },
  });
  stream.push(head);
  socket.on("data", (chunk) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on("end", () => stream.push(null));
  socket.on("close", () => stream.destroy());
  Object.defineProperties(stream, {
    remoteAddress: { get: () => socket.remoteAddress },
    remotePort: { get: () => socket.remotePort },
    localAddress: { get: () => socket.localAddress },
    localPort: { get: () => socket.localPort },
  });
  return stream;
}

/**
 * One cleartext port for HTTP/1.1 (REST, Connect, gRPC-Web) and HTTP/2 with prior knowledge (gRPC, h2c
 * Connect). Node's `allowHTTP1` needs TLS, so each connection's first bytes decide which server gets it.
 */
export async function listen({
  host,
  port,
  handler,
  logger,
  name,
  timeouts,
  connections,
  onRefused,
  onEvicted,
}: ListenOptions): Promise<Listener> {
  const limits = timeouts ?? {
    headersTimeoutMs: 20_000,
    requestTimeoutMs: 60_000,
    keepAliveTimeoutMs: 65_000,
  };
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
  // h1 never listens itself (connections arrive from the sniffer below), but its connection tracking, which
  // enforces headersTimeout/requestTimeout against slow clients and lets idle keep-alive sockets be closed
  // on shutdown, starts on "listening".
  h1.emit("listening");
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
  const sockets = new Set<net.Socket>();
  // The raw connection under each HTTP/2 session (the session reads a stream that replays its first bytes).
  const rawOf = new WeakMap<http2.Http2Session, net.Socket>();
  let handingOver: net.Socket | undefined;
  const sessions = new Set<http2.Http2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    if (handingOver) rawOf.set(s, handingOver);
    // An HTTP/2 connection with no activity for the keep-alive time is closed.
    s.setTimeout(limits.keepAliveTimeoutMs, () => s.close());
    s.on("close", () => sessions.delete(s));
  });
  // A request Node cannot parse still gets the contract's error body.
  h1.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !(socket as net.Socket & { _httpMessage?: unknown })._httpMessage) {
      const [status, reason, code, message] =
        err.code === "HPE_HEADER_OVERFLOW"
          ? [
              431,
              "Request Header Fields Too Large",
              "headers_too_large",
              "The request headers are too large (16 KiB at most).",
            ]
          : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
            ? [408, "Request Timeout", "request_timeout", "The request took too long to arrive."]
            : [400, "Bad Request", "invalid_request", "The request is not valid HTTP."];
      socket.end(rawHttp1Error(status, reason, code, message));
    } else socket.destroy();
    logger.debug("client error", { listener: name, err: err.message });
  });

  const counted = createConnectionLimits(connections);
  const shedSince = { listener_limit: 0, address_limit: 0, evicted: 0 };
  let shedLoggedAt = Number.NEGATIVE_INFINITY;
  /** One warning when a cap is first reached, then at most one a minute with the counts since the last. */
  const shed = (what: keyof typeof shedSince) => {
    if (what === "evicted") onEvicted?.();
    else onRefused?.(what);
    shedSince[what] += 1;
    const now = performance.now();
    if (now - shedLoggedAt < CAP_LOG_INTERVAL_MS) return;
    shedLoggedAt = now;
    const { evicted, ...refused } = shedSince;
    logger.warn("connection cap reached", { listener: name, open: counted.open, refused, evicted });
    shedSince.listener_limit = 0;
    shedSince.address_limit = 0;
    shedSince.evicted = 0;
  };
  // Connections with no request in flight, oldest idle first (idle-connections.ts).
  const idle = createIdleConnections();
  /** At the listener's cap, an idle connection of the client holding the most is closed to admit a new one. */
  const evictIdle = (): boolean => {
    const oldest = idle.takeVictim();
    if (!oldest) return false;
    oldest.uncount();
    reset(oldest.socket);
    shed("evicted");
    return true;
  };
  h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    idle.start(socket);
    res.once("close", () => idle.end(socket));
  });
  h2.on("stream", (stream) => {
    const socket = rawOf.get(stream.session as http2.Http2Session);
    if (!socket) return;
    idle.start(socket);
    stream.once("close", () => idle.end(socket));
  });

  const server = net.createServer((socket) => {
    const address = socket.remoteAddress;
    // Gone before it could be looked at (reset by its client): nothing to count.
    if (address === undefined) return void socket.destroy();
    let release = counted.admit(address);
    if (release === "listener_limit" && evictIdle()) release = counted.admit(address);
    if (typeof release === "string") {
      // Closed at once with a reset, before anything is read, parsed or timed: a refusal costs an accept and a
      // close, and leaves no TIME_WAIT behind on this side, however fast its client comes back.
      socket.on("error", () => undefined);
      reset(socket);
      return shed(release);
    }
    const uncount = release;
    sockets.add(socket);
    idle.add(socket, addressKey(address), uncount);
    // A client that connects and sends too little to tell HTTP/1.1 from HTTP/2 is cut off like any slow
    // client, at the headers time-out from its connection however it spaces its bytes (an idle timer would let
    // a preface trickled a byte at a time hold the socket for minutes).
    const sniffing = setTimeout(() => socket.destroy(), limits.headersTimeoutMs);
    sniffing.unref();
    socket.once("close", () => {
      uncount();
      sockets.delete(socket);
      idle.forget(socket);
      clearTimeout(sniffing);
    });
    socket.on("error", () => undefined);
    let seen = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      const isH2 = seen.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (isH2 && seen.length < PREFACE.length) return;
      socket.off("data", onData);
      clearTimeout(sniffing);
      if (isH2) {
        // The server makes its session while "connection" is emitted, and says so with "session".
        handingOver = socket;
        h2.emit("connection", replaying(socket, seen));
        handingOver = undefined;
        return;
      }
      socket.pause();
      socket.unshift(seen);
      h1.emit("connection", socket);
      socket.resume();
    };
    socket.on("data", onData);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as net.AddressInfo;
  return {
    port: addr.port,
    host,
    get openConnections() {
      return counted.open;
    },
    async close(graceMs = 10_000) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
      const deadline = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, graceMs);
      deadline.unref();
      // Keep-alive connections with no request in flight close now; busy ones close after their response.
      h1.on("request", (_req, res) => res.setHeader("connection", "close"));
      await new Promise<void>((resolve) => {
        const check = () => {
          h1.closeIdleConnections();
          if (sockets.size === 0) resolve();
          else setTimeout(check, 20).unref();
        };
        check();
      });
      clearTimeout(deadline);
      await closed;
      h1.close(() => undefined);
    },
  };
}
