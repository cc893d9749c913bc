import { ms } from "../platform/clock.ts";
import { retrySchedule } from "../webhooks/schedule.ts";
import { ConfigError, type Env, int } from "./env.ts";

/** How long finished data is kept. */
export interface RetentionSettings {
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

/** Reads RETENTION_DAYS, SANDBOX_RETENTION_DAYS, RETENTION_BATCH_SIZE and PORTAL_AUDIT_RETENTION_DAYS. */
export function readRetentionSettings(env: Env): RetentionSettings {
  return {
    retention: {
      days: retentionDays(env, "RETENTION_DAYS", 30),
      sandboxDays: int(env, "SANDBOX_RETENTION_DAYS", 90, MIN_RETENTION_DAYS, 3650),
      batchSize: int(env, "RETENTION_BATCH_SIZE", 500, 1, 5_000),
      auditDays: int(env, "PORTAL_AUDIT_RETENTION_DAYS", 365, 30, 3650),
    },
  };
}
