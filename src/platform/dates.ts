/** Calendar days, `YYYY-MM-DD`. */

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** A real calendar date `YYYY-MM-DD` (2027-02-30 is not one, though JavaScript would roll it to March). */
export function isCalendarDate(day: string): boolean {
  if (!DAY.test(day)) return false;
  const d = new Date(`${day}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === day;
}

/** Lagos is UTC+1 all year (West Africa Time has no daylight saving). */
const LAGOS_OFFSET_MS = 3_600_000;

/** The calendar day it is in Lagos at `now`. */
export function lagosDay(now: Date): string {
  return new Date(now.getTime() + LAGOS_OFFSET_MS).toISOString().slice(0, 10);
}

/** The calendar day `days` after `day`. */
export function addDays(day: string, days: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}

/** The instant the Lagos day of `now` began: its midnight, 23:00 UTC the day before. */
export function lagosDayStart(now: Date): Date {
  return new Date(Date.parse(`${lagosDay(now)}T00:00:00Z`) - LAGOS_OFFSET_MS);
}

/** The next midnight in Lagos after `now` (the end of its Lagos day). */
export function nextLagosMidnight(now: Date): Date {
  return new Date(lagosDayStart(now).getTime() + 86_400_000);
}
