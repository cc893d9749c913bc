import { readFileSync } from "node:fs";
import { ConfigError, checkHttpUrl, type Env, int, withoutTrailingSlash } from "./env.ts";

/** Where the two listeners bind, who may reach them, and the limits that protect them. */
export interface ListenerSettings {
  /** Partner listener port; 0 picks a free one. */
  port: number;
  /** Partner listener address. */
  host: string;
  /** Internal listener port; 0 picks a free one. */
  internalPort: number;
  /** Internal listener address: loopback unless an operator decides otherwise. */
  internalHost: string;
  /** Base URL partners' users reach the service on (consent pages); defaults to the partner listener. */
  publicUrl: string | undefined;
  /**
   * CORS_ALLOWED_ORIGINS: web origins (`https://app.example.com`) whose browser code may call the API (REST,
   * Connect, gRPC-Web) directly. None by default: no CORS headers at all.
   */
  corsOrigins: string[];
  /** HTTP limits against slow or stuck clients, on both listeners. */
  http: {
    /** Time a client has to send its request headers (slow-loris clients are cut off after it). */
    headersTimeoutMs: number;
    /** Time a client has to send its whole request. */
    requestTimeoutMs: number;
    /** How long an idle keep-alive connection is kept. */
    keepAliveTimeoutMs: number;
  };
  /**
   * Caps on open connections, answered by closing a new connection at once (docs/operations.md "Connection
   * limits"). The partner and internal listeners count apart, so a flood on the partner port never locks
   * operators out of the internal API and `/metrics`.
   */
  connections: {
    /** MAX_CONNECTIONS: open connections each listener holds at most. */
    max: number;
    /**
     * MAX_CONNECTIONS_PER_ADDRESS: open connections one client address (IPv6: its /64) holds at most on the
     * partner listener; 0 for none (behind a load balancer, which is the one address the service sees).
     */
    maxPerAddress: number;
  };
}

/** The soft "Max open files" limit in a `/proc/<pid>/limits` text; undefined when absent or unlimited. */
export function openFileLimit(limits: string): number | undefined {
  const soft = /^Max open files\s+(\d+)/m.exec(limits)?.[1];
  return soft === undefined ? undefined : Number(soft);
}

/**
 * Connections each listener holds when `MAX_CONNECTIONS` is unset: a quarter of the process's open-file limit
 * (Node raises its soft limit to the hard one at start), so the two listeners full together still leave half
 * the descriptors to the database pool, webhook deliveries and files; at most 10,000, which no load balancer's
 * pool comes near and which bounds the memory idle sockets take where the limit is in the millions. Without
 * `/proc` (macOS, a laptop), 2,000.
 */
export function defaultMaxConnections(fileLimit: number | undefined): number {
  if (fileLimit === undefined) return 2_000;
  return Math.max(1, Math.min(10_000, Math.floor(fileLimit / 4)));
}

/** This process's open-file limit, read from `/proc/self/limits` where there is one (Linux). */
function processFileLimit(): number | undefined {
  try {
    return openFileLimit(readFileSync("/proc/self/limits", "utf8"));
  } catch {
    return undefined;
  }
}

/** A comma-separated list of exact web origins (`scheme://host[:port]`); `*` is refused (keys are bearer secrets). */
function origins(env: Env, name: string): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return [];
  return raw.split(",").map((item) => {
    const value = item.trim();
    if (value === "*") {
      throw new ConfigError(
        `${name} cannot be "*": API keys are bearer secrets, so list the exact origins of your own web apps`,
      );
    }
    const url = URL.parse(value);
    if (!url || !["http:", "https:"].includes(url.protocol) || url.origin !== value) {
      throw new ConfigError(
        `${name} must list origins as scheme://host[:port] (no path, no trailing slash), got "${value}"`,
      );
    }
    return value;
  });
}

/** Reads PORT, HOST, INTERNAL_PORT, INTERNAL_HOST, PUBLIC_URL, CORS_ALLOWED_ORIGINS and the HTTP limits. */
export function readListenerSettings(env: Env): ListenerSettings {
  const publicUrl = env.PUBLIC_URL || undefined;
  checkHttpUrl("PUBLIC_URL", publicUrl);
  return {
    port: int(env, "PORT", 8080, 0, 65535),
    host: env.HOST || "0.0.0.0",
    internalPort: int(env, "INTERNAL_PORT", 9090, 0, 65535),
    internalHost: env.INTERNAL_HOST || "127.0.0.1",
    publicUrl: publicUrl === undefined ? undefined : withoutTrailingSlash(publicUrl),
    corsOrigins: origins(env, "CORS_ALLOWED_ORIGINS"),
    http: {
      headersTimeoutMs: int(env, "HTTP_HEADERS_TIMEOUT_MS", 20_000, 500, 300_000),
      requestTimeoutMs: int(env, "HTTP_REQUEST_TIMEOUT_MS", 60_000, 1_000, 600_000),
      keepAliveTimeoutMs: int(env, "HTTP_KEEP_ALIVE_TIMEOUT_MS", 65_000, 1_000, 600_000),
    },
    connections: {
      max: int(env, "MAX_CONNECTIONS", defaultMaxConnections(processFileLimit()), 1, 1_000_000),
      // One partner's whole read burst (CONTRACT.md §8, 500) may arrive at once on as many HTTP/1.1 connections
      // (Node's fetch and Go's default client open one per call in flight): it gets its 429s, never a reset.
      maxPerAddress: int(env, "MAX_CONNECTIONS_PER_ADDRESS", 512, 0, 1_000_000),
    },
  };
}
