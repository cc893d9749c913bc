import { type DatabaseSettings, readDatabaseSettings } from "./config/database.ts";
import { type Env, oneOf } from "./config/env.ts";
import { type ListenerSettings, readListenerSettings } from "./config/listeners.ts";
import { type PaymentSettings, readPaymentSettings } from "./config/payments.ts";
import { type PortalSettings, readPortalSettings } from "./config/portal.ts";
import { type RateLimitSettings, readRateLimitSettings } from "./config/rate-limits.ts";
import { type RetentionSettings, readRetentionSettings } from "./config/retention.ts";
import { readSecretSettings, type SecretSettings } from "./config/secrets.ts";
import { readSmsSettings, type SmsSettings } from "./config/sms.ts";
import { readWebhookSettings, type WebhookSettings } from "./config/webhooks.ts";
import type { LogLevel } from "./platform/logger.ts";
import type { BucketSpec } from "./ratelimit/limiters.service.ts";

export { dataFiles, defaultPoolSize } from "./config/database.ts";
export { ConfigError } from "./config/env.ts";
export { defaultMaxConnections, openFileLimit } from "./config/listeners.ts";
export { defaultPortalSigninLimits } from "./config/portal.ts";
export { defaultExpensiveLimits, defaultRateLimits } from "./config/rate-limits.ts";
export { MIN_RETENTION_DAYS } from "./config/retention.ts";
export { parseMasterKey } from "./config/secrets.ts";
export { defaultWebhookSendLimit } from "./config/webhooks.ts";

/** Which parts of the service this process runs (ARCHITECTURE.md "Processes and listeners"). */
export type Role = "all" | "api" | "worker";

/** A token bucket (the rate limit feature's). */
export type { BucketSpec };

/**
 * The service's configuration, read once from the environment and frozen (CONTRACT.md §10). Each concern's
 * settings, with the variables they come from, are described in their own module under `config/`.
 */
export interface Config
  extends ListenerSettings,
    DatabaseSettings,
    SecretSettings,
    WebhookSettings,
    RateLimitSettings,
    PortalSettings,
    PaymentSettings,
    SmsSettings,
    RetentionSettings {
  /** What this process runs. */
  role: Role;
  /** Minimum log level. */
  logLevel: LogLevel;
}

/** Reads and validates the configuration. Fails fast with a message naming the variable. */
export function loadConfig(env: Env = process.env): Readonly<Config> {
  const database = readDatabaseSettings(env);
  const secrets = readSecretSettings(env, database.databaseUrl);
  return Object.freeze({
    ...readListenerSettings(env),
    ...database,
    ...secrets,
    role: oneOf(env, "ROLE", ["all", "api", "worker"] as const, "all"),
    logLevel: oneOf(env, "LOG_LEVEL", ["debug", "info", "warn", "error", "silent"] as const, "info"),
    ...readPaymentSettings(env),
    ...readSmsSettings(env),
    ...readWebhookSettings(env, database.databaseUrl),
    ...readRateLimitSettings(env),
    ...readPortalSettings(env),
    ...readRetentionSettings(env),
  });
}
