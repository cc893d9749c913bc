import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import os from "node:os";
import path from "node:path";
import type { SmsConfig } from "./person/sms.ts";
import { ms } from "./platform/clock.ts";
import type { LogLevel } from "./platform/logger.ts";
import type { BucketSpec } from "./ratelimit/limiters.service.ts";
import { retrySchedule } from "./webhooks/schedule.ts";

/** Which parts of the service this process runs (ARCHITECTURE.md "Processes and listeners"). */
export type Role = "all" | "api" | "worker";

/** A token bucket (the rate limit feature's). */
export type { BucketSpec };

/** The service's configuration, read once from the environment and frozen (CONTRACT.md §10). */
export interface Config {
  /** Partner listener port; 0 picks a free one. */
  port: number;
  /** Partner listener address. */
  host: string;
  /** Internal listener port; 0 picks a free one. */
  internalPort: number;
  /** Internal listener address: loopback unless an operator decides otherwise. */
  internalHost: string;
  /** PostgreSQL URL; unset means the embedded PostgreSQL in `dataDir`. */
  databaseUrl: string | undefined;
  /** Where the embedded PostgreSQL, the development master key and the service file live. */
  dataDir: string;
  /** 32-byte key that encrypts private keys and secrets at rest. Required with `databaseUrl`. */
  masterKey: Buffer | undefined;
  /**
   * Further master keys whose sealed values may be opened (never sealed with): MASTER_KEYS_ACCEPTED, comma
   * separated. They carry a master key rotation (docs/operations.md).
   */
  acceptedMasterKeys: Buffer[];
  /** Token the internal API requires. Required with `databaseUrl`. */
  internalToken: string | undefined;
  /** Base URL partners' users reach the service on (consent pages); defaults to the partner listener. */
  publicUrl: string | undefined;
  /** What this process runs. */
  role: Role;
  /** Minimum log level. */
  logLevel: LogLevel;
  /**
   * ALLOW_LOCAL_WEBHOOKS: http and loopback destinations for sandbox subscriptions (local development), never
   * the service's own ports. Unset, on with the embedded PostgreSQL (a laptop, where the quickstart receives on
   * loopback) and off with DATABASE_URL (a deployment).
   */
  allowLocalWebhooks: boolean;
  /**
   * CORS_ALLOWED_ORIGINS: web origins (`https://app.example.com`) whose browser code may call the API (REST,
   * Connect, gRPC-Web) directly. None by default: no CORS headers at all.
   */
  corsOrigins: string[];
  /** Per-API-key rate limits. */
  rateLimits: { read: BucketSpec; write: BucketSpec };
  /** Limits on expensive work per partner (docs/rate-limits.md "Limits on expensive work"). */
  expensiveLimits: {
    /**
     * SNAPSHOT_CONCURRENCY_PER_KEY: snapshot reads one API key may have in flight on one instance; past it,
     * 429 `too_many_concurrent_reads` with `Retry-After: 1`.
     */
    snapshotConcurrencyPerKey: number;
    /**
     * DISBURSEMENTS_PER_USER_PER_DAY: disbursements one partner may create for one user in one environment
     * in one Lagos day; past it, 429 `user_daily_disbursement_limit` until the next Lagos midnight.
     */
    disbursementsPerUserPerDay: number;
  };
  /**
   * Failed portal sign-ins (docs/portal.md "Signing in"), each a token bucket shared by every instance:
   * PORTAL_SIGNIN_ADDRESS_LIMIT per client address (an IPv6 /64 counts as one), PORTAL_SIGNIN_ACCOUNT_LIMIT per
   * account from browsers that have not signed in to it before, PORTAL_SIGNIN_DEVICE_LIMIT per browser that has.
   */
  portalSignin: { address: BucketSpec; account: BucketSpec; device: BucketSpec };
  /** Database connection pool size of this process. */
  dbPoolSize: number;
  /**
   * Limits that keep the pool from ever hanging: the wait for a pooled connection (then 503 `unavailable`
   * with `Retry-After`), and PostgreSQL's `statement_timeout` and `idle_in_transaction_session_timeout`.
   */
  dbTimeouts: { acquireMs: number; statementMs: number; idleInTransactionMs: number };
  /** A payout PENDING or PROCESSING this long is resumed by the worker sweep (and at worker start). */
  payoutResumeAfterMs: number;
  /**
   * The production payment provider (a Paystack-style HTTP API): PAYMENT_PROVIDER_URL and
   * PAYMENT_PROVIDER_SECRET_KEY. Unset: production disbursements answer 503. Sandbox always uses the simulator.
   */
  paymentProvider: { baseUrl: string; secretKey: string; timeoutMs: number } | undefined;
  /**
   * The SMS provider that sends production's one-time codes (a Termii-style HTTP API): SMS_PROVIDER_URL and
   * SMS_PROVIDER_API_KEY, with SMS_SENDER_ID. Unset: production consent links are refused (no code could
   * reach the person). The sandbox never sends texts: its code is fixed.
   */
  smsProvider: SmsConfig | undefined;
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
  /** How long finished data is kept before the hourly purge deletes it (docs/operations.md "Retention"). */
  retention: {
    /**
     * RETENTION_DAYS: events and their deliveries after the last delivery's final state, decided or expired
     * consent links, deleted webhooks. Never less than {@link MIN_RETENTION_DAYS}.
     */
    days: number;
    /**
     * SANDBOX_RETENTION_DAYS: sandbox disbursements after their final state, with their installments, sandbox
     * books and the simulator's records. No less than {@link MIN_RETENTION_DAYS} either.
     */
    sandboxDays: number;
    /** RETENTION_BATCH_SIZE: rows one purge statement deletes at most (each batch is its own transaction). */
    batchSize: number;
    /** PORTAL_AUDIT_RETENTION_DAYS: the portal's audit events (docs/portal.md), a year unless set (30–3650). */
    auditDays: number;
  };
}

/**
 * The shortest retention allowed: one day more than the webhook retry window (CONTRACT.md §5, 14 days after a
 * delivery is created, replays included), so nothing a retry or a replay may still need is ever purged.
 */
export const MIN_RETENTION_DAYS = retrySchedule.windowMs / ms.day + 1;

/** Files the embedded default keeps in DATA_DIR. */
export const dataFiles = {
  masterKey: "master.key",
  internalToken: "internal-token",
  service: "service.json",
} as const;

/** Thrown when the environment holds a value the service cannot run with. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type Env = Record<string, string | undefined>;

/**
 * Database connections per process when `DB_POOL_SIZE` is unset: 10 for a server of its own (`DATABASE_URL`);
 * for the embedded PostgreSQL, which runs on this machine's cores, twice those cores plus one (HikariCP's
 * sizing for a database server's cores). Sessions beyond what the cores run at once only take turns: on 2
 * cores, a pool of 5 served about a quarter more snapshot reads a second than 16 (docs/operations.md).
 */
export function defaultPoolSize(embedded: boolean): number {
  return embedded ? 2 * os.availableParallelism() + 1 : 10;
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

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (["1", "true", "yes", "on"].includes(raw.toLowerCase())) return true;
  if (["0", "false", "no", "off"].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
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

function oneOf<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!values.includes(raw as T)) throw new ConfigError(`${name} must be one of ${values.join(", ")}`);
  return raw as T;
}

/** Parses a `capacity:refillPerSecond` bucket such as `500:100`. */
function bucket(env: Env, name: string, fallback: BucketSpec): BucketSpec {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const m = /^(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(raw);
  const capacity = Number(m?.[1]);
  const refillPerSecond = Number(m?.[2]);
  if (!m || capacity < 1 || refillPerSecond <= 0) {
    throw new ConfigError(`${name} must look like CAPACITY:REFILL_PER_SECOND (e.g. 500:100), got "${raw}"`);
  }
  return { capacity, refillPerSecond };
}

/**
 * RETENTION_DAYS (whole days, at most 3650): refused below {@link MIN_RETENTION_DAYS}, with the reason, since a
 * shorter retention would purge what a webhook retry or replay may still need.
 */
function retentionDays(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const days = Number(raw);
  if (!Number.isInteger(days) || days > 3650) {
    throw new ConfigError(
      `${name} must be a whole number of days from ${MIN_RETENTION_DAYS} to 3650, got "${raw}"`,
    );
  }
  if (days < MIN_RETENTION_DAYS) {
    throw new ConfigError(
      `${name} must be at least ${MIN_RETENTION_DAYS} days, got "${raw}": webhook deliveries are retried and ` +
        `replayed for ${MIN_RETENTION_DAYS - 1} days after they are created, and a shorter retention would ` +
        "purge events and deliveries still inside that window",
    );
  }
  return days;
}

/** Decodes MASTER_KEY: 32 bytes as 64 hex digits or base64. */
export function parseMasterKey(raw: string, name = "MASTER_KEY"): Buffer {
  const trimmed = raw.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : Buffer.from(trimmed, "base64");
  if (key.length !== 32) throw new ConfigError(`${name} must be 32 bytes, as 64 hex digits or base64`);
  return key;
}

/** The contract's default limits (CONTRACT.md §8). */
export const defaultRateLimits = {
  read: { capacity: 500, refillPerSecond: 100 },
  write: { capacity: 50, refillPerSecond: 25 },
} as const satisfies Config["rateLimits"];

/** Test sends and replays per partner and environment: 20 at once, then one a second (docs/rate-limits.md). */
export const defaultWebhookSendLimit = { capacity: 20, refillPerSecond: 1 } as const satisfies BucketSpec;

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

/** The default limits on expensive work (docs/rate-limits.md). */
export const defaultExpensiveLimits = {
  snapshotConcurrencyPerKey: 8,
  disbursementsPerUserPerDay: 10,
} as const satisfies Config["expensiveLimits"];

/**
 * Failed portal sign-ins: 20 per client address, then one every 10 seconds (a proxy shares one address among
 * many people, and a member on a browser they have signed in on is never counted here); 5 per account from
 * browsers it has not signed in on, then one every 5 minutes; 10 per browser that has, then one every 5
 * minutes. None of them ever holds back a member on their own browser because of someone else's guesses.
 */
export const defaultPortalSigninLimits = {
  address: { capacity: 20, refillPerSecond: 0.1 },
  account: { capacity: 5, refillPerSecond: 1 / 300 },
  device: { capacity: 10, refillPerSecond: 1 / 300 },
} as const satisfies Config["portalSignin"];

/** Reads and validates the configuration. Fails fast with a message naming the variable. */
export function loadConfig(env: Env = process.env): Readonly<Config> {
  const databaseUrl = env.DATABASE_URL || undefined;
  const masterKey = env.MASTER_KEY ? parseMasterKey(env.MASTER_KEY) : undefined;
  const acceptedMasterKeys = (env.MASTER_KEYS_ACCEPTED ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean)
    .map((k, i) => parseMasterKey(k, `MASTER_KEYS_ACCEPTED (key ${i + 1})`));
  const internalToken = env.INTERNAL_TOKEN || undefined;
  if (internalToken !== undefined && internalToken.length < 24) {
    throw new ConfigError("INTERNAL_TOKEN must be at least 24 characters");
  }
  if (databaseUrl && !masterKey) {
    throw new ConfigError(
      "MASTER_KEY is required with DATABASE_URL (only the embedded default generates one)",
    );
  }
  if (databaseUrl && !internalToken) {
    throw new ConfigError(
      "INTERNAL_TOKEN is required with DATABASE_URL (only the embedded default generates one)",
    );
  }
  const publicUrl = env.PUBLIC_URL || undefined;
  if (publicUrl !== undefined && !/^https?:\/\/[^/]+/.test(publicUrl)) {
    throw new ConfigError("PUBLIC_URL must be an absolute http(s) URL");
  }
  const providerUrl = env.PAYMENT_PROVIDER_URL || undefined;
  const providerSecret = env.PAYMENT_PROVIDER_SECRET_KEY || undefined;
  if (Boolean(providerUrl) !== Boolean(providerSecret)) {
    throw new ConfigError(
      "PAYMENT_PROVIDER_URL and PAYMENT_PROVIDER_SECRET_KEY are set together or not at all",
    );
  }
  if (providerUrl !== undefined && !/^https?:\/\/[^/]+/.test(providerUrl)) {
    throw new ConfigError("PAYMENT_PROVIDER_URL must be an absolute http(s) URL");
  }
  const smsUrl = env.SMS_PROVIDER_URL || undefined;
  const smsKey = env.SMS_PROVIDER_API_KEY || undefined;
  if (Boolean(smsUrl) !== Boolean(smsKey)) {
    throw new ConfigError("SMS_PROVIDER_URL and SMS_PROVIDER_API_KEY are set together or not at all");
  }
  if (smsUrl !== undefined && !/^https?:\/\/[^/]+/.test(smsUrl)) {
    throw new ConfigError("SMS_PROVIDER_URL must be an absolute http(s) URL");
  }
  const senderId = env.SMS_SENDER_ID || "Verify";
  if (!/^[A-Za-z0-9 ]{3,11}$/.test(senderId)) {
    throw new ConfigError("SMS_SENDER_ID must be 3 to 11 letters, digits or spaces");
  }
  const resumeAfterMs = int(env, "PAYOUT_RESUME_AFTER_MS", 60_000, 0, 86_400_000);
  const providerTimeoutMs = int(env, "PAYMENT_PROVIDER_TIMEOUT_MS", 30_000, 100, 120_000);
  if (providerUrl && resumeAfterMs > 0 && resumeAfterMs < providerTimeoutMs) {
    throw new ConfigError(
      "PAYOUT_RESUME_AFTER_MS must be longer than PAYMENT_PROVIDER_TIMEOUT_MS: a payout attempt holds its disbursement that long",
    );
  }
  return Object.freeze({
    port: int(env, "PORT", 8080, 0, 65535),
    host: env.HOST || "0.0.0.0",
    internalPort: int(env, "INTERNAL_PORT", 9090, 0, 65535),
    internalHost: env.INTERNAL_HOST || "127.0.0.1",
    databaseUrl,
    dataDir: path.resolve(env.DATA_DIR || "./.data"),
    masterKey,
    acceptedMasterKeys,
    internalToken,
    publicUrl: publicUrl?.replace(/\/+$/, ""),
    role: oneOf(env, "ROLE", ["all", "api", "worker"] as const, "all"),
    logLevel: oneOf(env, "LOG_LEVEL", ["debug", "info", "warn", "error", "silent"] as const, "info"),
    // The embedded default is a developer's machine; a DATABASE_URL is a deployment, where it is set on purpose
    // or not at all. Production subscriptions never get it either way (webhooks/destination.ts).
    allowLocalWebhooks: bool(env, "ALLOW_LOCAL_WEBHOOKS", !databaseUrl),
    corsOrigins: origins(env, "CORS_ALLOWED_ORIGINS"),
    rateLimits: {
      read: bucket(env, "RATE_LIMIT_READ", defaultRateLimits.read),
      write: bucket(env, "RATE_LIMIT_WRITE", defaultRateLimits.write),
    },
    expensiveLimits: {
      snapshotConcurrencyPerKey: int(
        env,
        "SNAPSHOT_CONCURRENCY_PER_KEY",
        defaultExpensiveLimits.snapshotConcurrencyPerKey,
        1,
        100_000,
      ),
      disbursementsPerUserPerDay: int(
        env,
        "DISBURSEMENTS_PER_USER_PER_DAY",
        defaultExpensiveLimits.disbursementsPerUserPerDay,
        1,
        1_000_000,
      ),
    },
    portalSignin: {
      address: bucket(env, "PORTAL_SIGNIN_ADDRESS_LIMIT", defaultPortalSigninLimits.address),
      account: bucket(env, "PORTAL_SIGNIN_ACCOUNT_LIMIT", defaultPortalSigninLimits.account),
      device: bucket(env, "PORTAL_SIGNIN_DEVICE_LIMIT", defaultPortalSigninLimits.device),
    },
    dbPoolSize: int(env, "DB_POOL_SIZE", defaultPoolSize(!databaseUrl), 2, 200),
    dbTimeouts: {
      acquireMs: int(env, "DB_ACQUIRE_TIMEOUT_MS", 3_000, 50, 60_000),
      statementMs: int(env, "DB_STATEMENT_TIMEOUT_MS", 30_000, 100, 3_600_000),
      idleInTransactionMs: int(env, "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", 10_000, 1_000, 3_600_000),
    },
    payoutResumeAfterMs: resumeAfterMs,
    paymentProvider:
      providerUrl && providerSecret
        ? {
            baseUrl: providerUrl.replace(/\/+$/, ""),
            secretKey: providerSecret,
            timeoutMs: providerTimeoutMs,
          }
        : undefined,
    smsProvider:
      smsUrl && smsKey
        ? {
            baseUrl: smsUrl.replace(/\/+$/, ""),
            apiKey: smsKey,
            senderId,
            timeoutMs: int(env, "SMS_PROVIDER_TIMEOUT_MS", 10_000, 100, 60_000),
          }
        : undefined,
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
    webhooks: {
      connectTimeoutMs: int(env, "WEBHOOK_CONNECT_TIMEOUT_MS", 5_000, 100, 60_000),
      dnsServers: dnsServers(env, "WEBHOOK_DNS_SERVERS"),
      dnsTimeoutMs: int(env, "WEBHOOK_DNS_TIMEOUT_MS", 2_000, 100, 10_000),
      timeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 30_000, 100, 120_000),
      sweepIntervalMs: int(env, "WEBHOOK_SWEEP_INTERVAL_MS", 10_000, 100, 3_600_000),
      ...webhookLimits(env),
    },
    retention: {
      days: retentionDays(env, "RETENTION_DAYS", 30),
      sandboxDays: int(env, "SANDBOX_RETENTION_DAYS", 90, MIN_RETENTION_DAYS, 3650),
      batchSize: int(env, "RETENTION_BATCH_SIZE", 500, 1, 5_000),
      auditDays: int(env, "PORTAL_AUDIT_RETENTION_DAYS", 365, 30, 3650),
    },
  });
}
