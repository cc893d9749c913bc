import type http from "node:http";
import net from "node:net";
import type { Logger } from "../logger.ts";
import { createConnectionAdmission } from "./connection-admission.ts";
import type { ConnectionCaps, ConnectionRefusal } from "./connection-limits.ts";
import { createHttp1Server, createHttp2Server, type Handler, type ListenerTimeouts } from "./http-servers.ts";
import { type Http2Sessions, sniffProtocol, trackHttp2Sessions } from "./protocol-sniffing.ts";

// A listener in parts: the HTTP/1.1 and HTTP/2 servers (http-servers.ts), which of them a new connection is
// for (protocol-sniffing.ts), and the caps on open connections (connection-admission.ts).
export type { Handler } from "./http-servers.ts";

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
  timeouts?: ListenerTimeouts;
  /** Caps on open connections, in all and per client address. */
  connections: ConnectionCaps;
  /** Told of each connection refused by those caps (for a metric). */
  onRefused?: (reason: ConnectionRefusal) => void;
  /** Told of each connection that had sent nothing, closed at the listener's cap to admit a new one. */
  onEvicted?: () => void;
}

const defaultTimeouts: ListenerTimeouts = {
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 65_000,
};

/** Stops accepting, then closes connections as their requests finish, and what is left after `graceMs`. */
async function closeGracefully(
  server: net.Server,
  h1: http.Server,
  sessions: Http2Sessions,
  sockets: ReadonlySet<net.Socket>,
  graceMs: number,
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  h1.closeIdleConnections();
  for (const s of sessions.open) s.close();
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
}

/**
 * One cleartext port for HTTP/1.1 (REST, Connect, gRPC-Web) and HTTP/2 with prior knowledge (gRPC, h2c
 * Connect). Node's `allowHTTP1` needs TLS, so each connection's first bytes decide which server gets it.
 */
export async function listen(options: ListenOptions): Promise<Listener> {
  const { host, port, handler, logger, name } = options;
  const limits = options.timeouts ?? defaultTimeouts;
  const h1 = createHttp1Server(limits, handler, (err) =>
    logger.debug("client error", { listener: name, err: err.message }),
  );
  const h2 = createHttp2Server(limits, handler);
  const sessions = trackHttp2Sessions(h2, limits.keepAliveTimeoutMs);
  const admission = createConnectionAdmission(options, { h1, h2, sessions });
  const server = net.createServer((socket) => {
    if (admission.admit(socket)) sniffProtocol(socket, limits.headersTimeoutMs, h1, sessions);
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
      return admission.open;
    },
    close: (graceMs = 10_000) => closeGracefully(server, h1, sessions, admission.sockets, graceMs),
  };
}
