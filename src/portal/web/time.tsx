import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { useEffect, useState } from "preact/hooks";

/** The product's time zone, and the portal's until a person picks another. */
export const DEFAULT_TIME_ZONE = "Africa/Lagos";
const STORAGE_KEY = "portal.timeZone";
const CHANGED = "portal:timezone";

/** The zones offered in the member's menu: the product's, UTC, and this browser's own. */
export function timeZoneChoices(): string[] {
  const own = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return [...new Set([DEFAULT_TIME_ZONE, "UTC", own])];
}

/** The zone this browser shows times in (a person's choice, kept in this browser). */
export function timeZone(): string {
  // No storage (a test of the formatting outside a browser): the product's zone.
  const chosen = globalThis.localStorage?.getItem(STORAGE_KEY);
  return chosen && timeZoneChoices().includes(chosen) ? chosen : DEFAULT_TIME_ZONE;
}

/** Shows every time in `zone` from now on, on every page already open in this tab. */
export function setTimeZone(zone: string): void {
  localStorage.setItem(STORAGE_KEY, zone);
  dispatchEvent(new Event(CHANGED));
}

/** The chosen zone, re-rendering when it changes. */
export function useTimeZone(): string {
  const [zone, setZone] = useState(timeZone());
  useEffect(() => {
    const onChange = () => setZone(timeZone());
    addEventListener(CHANGED, onChange);
    return () => removeEventListener(CHANGED, onChange);
  }, []);
  return zone;
}

const formats = new Map<string, Intl.DateTimeFormat>();

/** A date and time in `zone`, day first, 24 hours (`27 Nov 2026, 22:08:52`). */
export function zonedTime(d: Date, zone = timeZone()): string {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-GB", {
      timeZone: zone,
      day: "numeric",
      month: "short",
      year: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
    });
    formats.set(zone, f);
  }
  return f.format(d);
}

const RELATIVE = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["day", 86_400],
  ["hour", 3_600],
  ["minute", 60],
  ["second", 1],
];

/** How long ago (or from now) `d` is, in its largest whole unit: "3 minutes ago", "in 2 hours". */
export function relativeTime(d: Date, now = Date.now()): string {
  const seconds = Math.round((d.getTime() - now) / 1000);
  if (Math.abs(seconds) < 45) return seconds <= 0 ? "just now" : "in a moment";
  for (const [unit, size] of UNITS)
    if (Math.abs(seconds) >= size || unit === "second")
      return RELATIVE.format(Math.trunc(seconds / size), unit);
  return "";
}

/** A protobuf timestamp as a Date. */
export function dateOf(at: Timestamp): Date {
  return new Date(Number(at.seconds) * 1000 + Math.floor(at.nanos / 1e6));
}

/**
 * A time in the chosen zone with the exact UTC instant (ISO 8601) on hover; `relative` shows "3 minutes ago"
 * first, where how recent it is matters more than the clock.
 */
export function Time({ at, relative }: { at: Timestamp | Date | string | undefined; relative?: boolean }) {
  const zone = useTimeZone();
  if (!at) return <span class="muted">—</span>;
  const d = at instanceof Date ? at : typeof at === "string" ? new Date(at) : dateOf(at);
  if (Number.isNaN(d.getTime())) return <span class="muted">—</span>;
  const exact = zonedTime(d, zone);
  return (
    <time dateTime={d.toISOString()} title={`${exact} (${zone}); ${d.toISOString()}`}>
      {relative ? relativeTime(d) : exact}
    </time>
  );
}
