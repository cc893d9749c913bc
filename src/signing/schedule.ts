import { ms } from "../platform/clock.ts";

/**
 * The rotation schedule of CONTRACT.md §3, as data: a key signs for one calendar quarter (UTC), is
 * published this long before it starts, and stays published this long after it stops.
 */
export const rotationSchedule = {
  publishAheadMs: 30 * ms.day,
  keepAfterMs: 30 * ms.day,
} as const;

/** The first instant of the calendar quarter (UTC) after the one containing `t`. */
export function nextQuarterStart(t: Date): Date {
  const quarterStartMonth = Math.floor(t.getUTCMonth() / 3) * 3;
  return new Date(Date.UTC(t.getUTCFullYear(), quarterStartMonth + 3, 1));
}

/** Key status at a time: derived, never stored, so every instance agrees without coordination. */
export type KeyStatus = "INCOMING" | "ACTIVE" | "OUTGOING" | "RETIRED";

/** The status at `now` of a key with the given times. */
export function keyStatus(key: { notBefore: Date; retiresAt: Date; notAfter: Date }, now: Date): KeyStatus {
  const t = now.getTime();
  if (t < key.notBefore.getTime()) return "INCOMING";
  if (t < key.retiresAt.getTime()) return "ACTIVE";
  if (t < key.notAfter.getTime()) return "OUTGOING";
  return "RETIRED";
}

const order: Record<KeyStatus, number> = { ACTIVE: 0, INCOMING: 1, OUTGOING: 2, RETIRED: 3 };

/** Sorts keys for publication: the ACTIVE key first, then INCOMING, then OUTGOING, newest first within each. */
export function publicationOrder<T extends { status: KeyStatus; notBefore: Date }>(keys: T[]): T[] {
  return [...keys].sort(
    (a, b) => order[a.status] - order[b.status] || b.notBefore.getTime() - a.notBefore.getTime(),
  );
}
