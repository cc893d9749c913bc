import { ms } from "../platform/clock.ts";

/**
 * The delivery retry schedule of CONTRACT.md §5, as data: the wait after the n-th failed attempt, then
 * every 24 h, with add-only jitter, until 14 days after the delivery was created.
 */
export const retrySchedule = {
  delaysMs: [
    5 * ms.second,
    30 * ms.second,
    2 * ms.minute,
    10 * ms.minute,
    30 * ms.minute,
    ms.hour,
    2 * ms.hour,
    4 * ms.hour,
    8 * ms.hour,
    12 * ms.hour,
  ],
  thenEveryMs: 24 * ms.hour,
  jitter: 0.1,
  windowMs: 14 * ms.day,
} as const;

/** When the next attempt is due, or undefined when the delivery should be given up. */
export function nextAttemptAt(input: {
  /** Attempts made so far, the failed one included (1 after the first attempt). */
  attempts: number;
  now: Date;
  createdAt: Date;
  /** Seconds from a 429/503 Retry-After header, if any. */
  retryAfterSeconds?: number | undefined;
  /** A number in [0, 1) for the jitter; Math.random by default. */
  random?: number;
}): Date | undefined {
  const deadline = input.createdAt.getTime() + retrySchedule.windowMs;
  const now = input.now.getTime();
  if (now >= deadline) return undefined;
  const base = retrySchedule.delaysMs[input.attempts - 1] ?? retrySchedule.thenEveryMs;
  let delay = base * (1 + retrySchedule.jitter * (input.random ?? Math.random()));
  if (input.retryAfterSeconds !== undefined) {
    // Honoured within the schedule's bounds: never sooner than planned, never later than a day.
    delay = Math.min(Math.max(delay, input.retryAfterSeconds * ms.second), retrySchedule.thenEveryMs);
  }
  // The last attempt is made at the deadline itself; one that fails there is given up.
  return new Date(Math.min(now + Math.round(delay), deadline));
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), or undefined. */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now.getTime()) / 1000));
}
