import type http from "node:http";
import type http2 from "node:http2";
import type net from "node:net";
import { addressKey } from "../ip.ts";
import type { Logger } from "../logger.ts";
import { type ConnectionCaps, type ConnectionRefusal, createConnectionLimits } from "./connection-limits.ts";
import { createIdleConnections, type IdleConnections } from "./idle-connections.ts";
import type { Http2Sessions } from "./protocol-sniffing.ts";

/** How often, at most, a listener logs that a connection cap was reached (the metrics count every case). */
const CAP_LOG_INTERVAL_MS = 60_000;

/**
 * Closes a socket with a reset, which leaves no TIME_WAIT on this side. One already shutting down (its client
 * hung up, so it is ending too) is closed plainly: Node cannot reset it (EINVAL), and would drop its
 * descriptor without closing it or ever emitting "close".
 */
function reset(socket: net.Socket): void {
  if (socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

/** Options for {@link createConnectionAdmission}. */
export interface AdmissionOptions {
  /** The listener's name, for the logs. */
  name: string;
  logger: Logger;
  /** Caps on open connections, in all and per client address. */
  connections: ConnectionCaps;
  /** Told of each connection refused by those caps (for a metric). */
  onRefused?: ((reason: ConnectionRefusal) => void) | undefined;
  /** Told of each connection that had sent nothing, closed at the listener's cap to admit a new one. */
  onEvicted?: (() => void) | undefined;
}

/** The connections a listener holds, within its caps. */
export interface ConnectionAdmission {
  /** Counts a new connection, or closes it at once when a cap refuses it (then false). */
  admit(socket: net.Socket): boolean;
  /** Connections open now (refused ones never count). */
  readonly open: number;
  /** Every admitted connection still open. */
  readonly sockets: ReadonlySet<net.Socket>;
}

type Shed = ConnectionRefusal | "evicted";

/**
 * Tells the metric of each connection shed, and logs one warning when a cap is first reached, then at most one
 * a minute with the counts since the last.
 */
function shedReporter(options: AdmissionOptions, openNow: () => number): (what: Shed) => void {
  const { logger, name, onRefused, onEvicted } = options;
  const shedSince = { listener_limit: 0, address_limit: 0, evicted: 0 };
  let shedLoggedAt = Number.NEGATIVE_INFINITY;
  return (what) => {
    if (what === "evicted") onEvicted?.();
    else onRefused?.(what);
    shedSince[what] += 1;
    const now = performance.now();
    if (now - shedLoggedAt < CAP_LOG_INTERVAL_MS) return;
    shedLoggedAt = now;
    const { evicted, ...refused } = shedSince;
    logger.warn("connection cap reached", { listener: name, open: openNow(), refused, evicted });
    shedSince.listener_limit = 0;
    shedSince.address_limit = 0;
    shedSince.evicted = 0;
  };
}

/** A connection is busy while an HTTP/1.1 request or an HTTP/2 stream runs on it, idle otherwise. */
function trackRequests(
  idle: IdleConnections,
  h1: http.Server,
  h2: http2.Http2Server,
  sessions: Http2Sessions,
) {
  h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    idle.start(socket);
    res.once("close", () => idle.end(socket));
  });
  h2.on("stream", (stream) => {
    const socket = sessions.rawSocketOf(stream.session as http2.Http2Session);
    if (!socket) return;
    idle.start(socket);
    stream.once("close", () => idle.end(socket));
  });
}

/**
 * Admits a listener's connections within its caps. At the listener's cap, an idle connection of the client
 * holding the most is closed to admit a new one (idle-connections.ts); past the caps, a new connection is closed
 * at once.
 */
export function createConnectionAdmission(
  options: AdmissionOptions,
  servers: { h1: http.Server; h2: http2.Http2Server; sessions: Http2Sessions },
): ConnectionAdmission {
  const counted = createConnectionLimits(options.connections);
  const shed = shedReporter(options, () => counted.open);
  const sockets = new Set<net.Socket>();
  // Connections with no request in flight, oldest idle first (idle-connections.ts).
  const idle = createIdleConnections();
  trackRequests(idle, servers.h1, servers.h2, servers.sessions);
  const evictIdle = (): boolean => {
    const oldest = idle.takeVictim();
    if (!oldest) return false;
    oldest.uncount();
    reset(oldest.socket);
    shed("evicted");
    return true;
  };
  const admit = (socket: net.Socket): boolean => {
    const address = socket.remoteAddress;
    // Gone before it could be looked at (reset by its client): nothing to count.
    if (address === undefined) {
      socket.destroy();
      return false;
    }
    let release = counted.admit(address);
    if (release === "listener_limit" && evictIdle()) release = counted.admit(address);
    if (typeof release === "string") {
      // Closed at once with a reset, before anything is read, parsed or timed: a refusal costs an accept and a
      // close, and leaves no TIME_WAIT behind on this side, however fast its client comes back.
      socket.on("error", () => undefined);
      reset(socket);
      shed(release);
      return false;
    }
    const uncount = release;
    sockets.add(socket);
    idle.add(socket, addressKey(address), uncount);
    socket.once("close", () => {
      uncount();
      sockets.delete(socket);
      idle.forget(socket);
    });
    socket.on("error", () => undefined);
    return true;
  };
  return {
    admit,
    sockets,
    get open() {
      return counted.open;
    },
  };
}
