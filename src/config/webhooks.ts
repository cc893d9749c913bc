import { isIP } from "node:net";
import type { BucketSpec } from "../ratelimit/limiters.service.ts";
import { bool, bucket, ConfigError, type Env, int } from "./env.ts";

/** Webhook delivery: where subscriptions may point, time limits, concurrency and the circuit breaker. */
export interface WebhookSettings {
  /**
   * ALLOW_LOCAL_WEBHOOKS: http and loopback destinations for sandbox subscriptions (local development), never
   * the service's own ports. Unset, on with the embedded PostgreSQL (a laptop, where the quickstart receives on
   * loopback) and off with DATABASE_URL (a deployment).
   */
  allowLocalWebhooks: boolean;
  /** Webhook delivery (CONTRACT.md §5). */
  webhooks: {
    /** Time allowed to connect (5 s). */
    connectTimeoutMs: number;
    /**
     * WEBHOOK_DNS_SERVERS: name servers that resolve webhook destinations (comma-separated `ip` or `ip:port`);
     * unset, those of /etc/resolv.conf.
     */
    dnsServers: string[];
    /**
     * WEBHOOK_DNS_TIMEOUT_MS: the longest a destination's lookup may take (2 s): at create and update, then
     * `422 validation_failed` naming the URL; at a delivery attempt, a `dns_error` attempt.
     */
    dnsTimeoutMs: number;
    /** Time allowed for a whole attempt (30 s). */
    timeoutMs: number;
    /** How often a worker looks for overdue deliveries whose wake-up was lost. */
    sweepIntervalMs: number;
    /**
     * Attempts one worker process has in flight at once, per environment (sandbox and production each have
     * this many, so neither can starve the other).
     */
    maxInFlight: number;
    /** Attempts in flight at once to one partner's subscriptions, per environment, in one worker process. */
    maxInFlightPerPartner: number;
    /** Attempts in flight at once to one subscription (one destination URL), in one worker process. */
    maxInFlightPerDestination: number;
    /** Consecutive failed attempts (errors, time-outs, non-2xx) after which a subscription's circuit opens. */
    circuitFailures: number;
    /** The longest an open circuit waits between probes (the wait doubles from 5 s up to this). */
    circuitMaxWaitMs: number;
    /** Test sends and replays, per partner and environment (their own bucket, beside the per-key limits). */
    sendRateLimit: BucketSpec;
  };
}

/** Test sends and replays per partner and environment: 20 at once, then one a second (docs/rate-limits.md). */
export const defaultWebhookSendLimit = { capacity: 20, refillPerSecond: 1 } as const satisfies BucketSpec;

/** Name servers as `ip`, `ip:port` or `[ipv6]:port`; c-ares takes them as they are written. */
function dnsServers(env: Env, name: string): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return [];
  return raw.split(",").map((item) => {
    const value = item.trim();
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+))(?::(\d{1,5}))?$|^([0-9a-fA-F:]+)$/.exec(value);
    const ip = m?.[1] ?? m?.[2] ?? m?.[4];
    const port = m?.[3] === undefined ? 53 : Number(m[3]);
    if (!ip || isIP(ip) === 0 || port < 1 || port > 65535) {
      throw new ConfigError(`${name} must list name servers as ip, ip:port or [ipv6]:port, got "${value}"`);
    }
    return value;
  });
}

/** The webhook delivery limits, read together so they can be checked against each other. */
function webhookLimits(env: Env) {
  const maxInFlight = int(env, "WEBHOOK_MAX_IN_FLIGHT", 256, 1, 10_000);
  const maxInFlightPerPartner = int(env, "WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER", 64, 1, 10_000);
  const maxInFlightPerDestination = int(env, "WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION", 8, 1, 10_000);
  if (maxInFlightPerPartner > maxInFlight) {
    throw new ConfigError(
      "WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER must be at most WEBHOOK_MAX_IN_FLIGHT: one partner may not take more than the whole",
    );
  }
  if (maxInFlightPerDestination > maxInFlightPerPartner) {
    throw new ConfigError(
      "WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION must be at most WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER",
    );
  }
  return {
    maxInFlight,
    maxInFlightPerPartner,
    maxInFlightPerDestination,
    circuitFailures: int(env, "WEBHOOK_CIRCUIT_FAILURES", 5, 1, 1_000),
    circuitMaxWaitMs: int(env, "WEBHOOK_CIRCUIT_MAX_WAIT_MS", 600_000, 5_000, 86_400_000),
    sendRateLimit: bucket(env, "WEBHOOK_SEND_RATE_LIMIT", defaultWebhookSendLimit),
  };
}

/** Reads ALLOW_LOCAL_WEBHOOKS and the WEBHOOK_* variables. */
export function readWebhookSettings(env: Env, databaseUrl: string | undefined): WebhookSettings {
  return {
    // The embedded default is a developer's machine; a DATABASE_URL is a deployment, where it is set on purpose
    // or not at all. Production subscriptions never get it either way (webhooks/destination.ts).
    allowLocalWebhooks: bool(env, "ALLOW_LOCAL_WEBHOOKS", !databaseUrl),
    webhooks: {
      connectTimeoutMs: int(env, "WEBHOOK_CONNECT_TIMEOUT_MS", 5_000, 100, 60_000),
      dnsServers: dnsServers(env, "WEBHOOK_DNS_SERVERS"),
      dnsTimeoutMs: int(env, "WEBHOOK_DNS_TIMEOUT_MS", 2_000, 100, 10_000),
      timeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 30_000, 100, 120_000),
      sweepIntervalMs: int(env, "WEBHOOK_SWEEP_INTERVAL_MS", 10_000, 100, 3_600_000),
      ...webhookLimits(env),
    },
  };
}
