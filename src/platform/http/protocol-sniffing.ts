import type http from "node:http";
import type http2 from "node:http2";
import type net from "node:net";
import { Duplex } from "node:stream";
import { rememberSessionAddress } from "./client-address.ts";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

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

/** The HTTP/2 sessions of a listener, and the raw connection under each. */
export interface Http2Sessions {
  /** Sessions open now. */
  readonly open: ReadonlySet<http2.Http2Session>;
  /** The raw connection a session reads from (through the stream that replays its first bytes). */
  rawSocketOf(session: http2.Http2Session): net.Socket | undefined;
  /** Hands an HTTP/2 connection, whose first bytes were already read, to the HTTP/2 server. */
  handOver(socket: net.Socket, head: Buffer): void;
}

/** Tracks the HTTP/2 server's sessions; one idle for the keep-alive time is closed. */
export function trackHttp2Sessions(h2: http2.Http2Server, keepAliveTimeoutMs: number): Http2Sessions {
  const open = new Set<http2.Http2Session>();
  const rawOf = new WeakMap<http2.Http2Session, net.Socket>();
  let handingOver: net.Socket | undefined;
  h2.on("session", (s) => {
    open.add(s);
    if (handingOver) {
      rawOf.set(s, handingOver);
      rememberSessionAddress(s, handingOver.remoteAddress);
    }
    // An HTTP/2 connection with no activity for the keep-alive time is closed.
    s.setTimeout(keepAliveTimeoutMs, () => s.close());
    s.on("close", () => open.delete(s));
  });
  return {
    open,
    rawSocketOf: (session) => rawOf.get(session),
    handOver(socket, head) {
      // The server makes its session while "connection" is emitted, and says so with "session".
      handingOver = socket;
      h2.emit("connection", replaying(socket, head));
      handingOver = undefined;
    },
  };
}

/**
 * Reads a new connection's first bytes to tell HTTP/2 with prior knowledge (its preface) from HTTP/1.1, then
 * hands it to that server. A client that connects and sends too little to tell them apart is cut off like any
 * slow client, at the headers time-out from its connection however it spaces its bytes (an idle timer would let
 * a preface trickled a byte at a time hold the socket for minutes).
 */
export function sniffProtocol(
  socket: net.Socket,
  headersTimeoutMs: number,
  h1: http.Server,
  h2: Http2Sessions,
): void {
  const sniffing = setTimeout(() => socket.destroy(), headersTimeoutMs);
  sniffing.unref();
  socket.once("close", () => clearTimeout(sniffing));
  let seen = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    seen = Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, PREFACE.length);
    const isH2 = seen.subarray(0, n).equals(PREFACE.subarray(0, n));
    if (isH2 && seen.length < PREFACE.length) return;
    socket.off("data", onData);
    clearTimeout(sniffing);
    if (isH2) return h2.handOver(socket, seen);
    socket.pause();
    socket.unshift(seen);
    h1.emit("connection", socket);
    socket.resume();
  };
  socket.on("data", onData);
}
