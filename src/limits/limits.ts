import { validationFailed } from "../platform/errors.ts";
import type { BucketSpec } from "../ratelimit/limiters.service.ts";

/** What one API key gets: its buckets and its partner's limits on expensive work (CONTRACT.md §8). */
export interface Limits {
  read: BucketSpec;
  write: BucketSpec;
  /** Snapshot reads the key may have in flight at once on one instance. */
  snapshotConcurrency: number;
  /** Disbursements the partner may create for one user in the key's environment in one Lagos day. */
  disbursementsPerUserPerDay: number;
}

/** An operator's override at one level: an absent field follows the level above. */
export type LimitOverrides = Partial<Limits>;

/** The names an override can be reset by (and `all`). */
export const LIMIT_NAMES = [
  "read",
  "write",
  "snapshot_concurrency",
  "disbursements_per_user_per_day",
] as const;

/** One of {@link LIMIT_NAMES}. */
export type LimitName = (typeof LIMIT_NAMES)[number];

/** The property of {@link Limits} each name resets. */
const PROPERTY: Record<LimitName, keyof Limits> = {
  read: "read",
  write: "write",
  snapshot_concurrency: "snapshotConcurrency",
  disbursements_per_user_per_day: "disbursementsPerUserPerDay",
};

/**
 * The bounds of an override (docs/rate-limits.md "Dedicated capacity"; the table's checks hold them too). Wide
 * enough for any agreement, narrow enough that a typo cannot switch a limit off: a refill of 10000 a second is
 * 20 times the default read rate, and 1000 snapshot reads in flight per key is more than an instance can serve.
 */
export const LIMIT_CAPS = {
  capacity: { min: 1, max: 100_000 },
  /** In steps of 0.01: stored as numeric(7, 2). */
  refillPerSecond: { min: 0.01, max: 10_000 },
  snapshotConcurrency: { min: 1, max: 1_000 },
  disbursementsPerUserPerDay: { min: 1, max: 10_000 },
} as const;

/** Which level an override is set at: a key overrides only its buckets. */
export type LimitLevel = "partner" | "key";

/** A change an operator asks for: limits to set and names of overrides to remove. */
export interface LimitChange {
  set: LimitOverrides;
  reset: readonly string[];
}

const isInt = (n: number, { min, max }: { min: number; max: number }) =>
  Number.isInteger(n) && n >= min && n <= max;

function checkBucket(problems: Record<string, string>, name: "read" | "write", b: BucketSpec | undefined) {
  if (!b) return;
  const { capacity, refillPerSecond } = LIMIT_CAPS;
  if (!isInt(b.capacity, capacity))
    problems[`limits.${name}.capacity`] = `must be an integer from ${capacity.min} to ${capacity.max} tokens`;
  const r = b.refillPerSecond;
  const hundredths = r * 100;
  if (
    !Number.isFinite(r) ||
    r < refillPerSecond.min ||
    r > refillPerSecond.max ||
    Math.abs(hundredths - Math.round(hundredths)) > 1e-6
  ) {
    problems[`limits.${name}.refillPerSecond`] =
      `must be from ${refillPerSecond.min} to ${refillPerSecond.max} tokens a second, in steps of 0.01`;
  }
}

/**
 * Checks a change against {@link LIMIT_CAPS} and its level, naming every bad field as the request names it
 * (`limits.read.capacity`, `reset`, …), and returns the names to reset (`all` expanded).
 */
export function checkChange(change: LimitChange, level: LimitLevel): Set<LimitName> {
  const problems: Record<string, string> = {};
  const { set } = change;
  checkBucket(problems, "read", set.read);
  checkBucket(problems, "write", set.write);
  for (const [field, value] of [
    ["snapshotConcurrency", set.snapshotConcurrency],
    ["disbursementsPerUserPerDay", set.disbursementsPerUserPerDay],
  ] as const) {
    if (value === undefined) continue;
    const caps = LIMIT_CAPS[field];
    if (level === "key") problems[`limits.${field}`] = "is set per partner and environment, not per key";
    else if (!isInt(value, caps))
      problems[`limits.${field}`] = `must be an integer from ${caps.min} to ${caps.max}`;
  }
  const allowed: readonly LimitName[] = level === "key" ? ["read", "write"] : LIMIT_NAMES;
  const reset = new Set<LimitName>();
  for (const name of change.reset) {
    if (name === "all") for (const n of allowed) reset.add(n);
    else if ((allowed as readonly string[]).includes(name)) reset.add(name as LimitName);
    else
      problems.reset =
        `unknown limit "${name}"` +
        (level === "key" ? ": a key has only read and write" : "") +
        `; one of ${[...allowed, "all"].join(", ")}`;
  }
  for (const name of reset) {
    if (set[PROPERTY[name]] !== undefined && !change.reset.includes("all"))
      problems.reset = `${name} is both set and reset; do one or the other`;
  }
  const setsSomething = Object.values(set).some((v) => v !== undefined);
  if (!setsSomething && reset.size === 0 && !problems.reset)
    problems.limits = "set at least one limit, or reset one";
  if (Object.keys(problems).length) throw validationFailed(problems);
  return reset;
}

/** `current` with `reset` removed, then `set` applied. */
export function applyChange(
  current: LimitOverrides,
  set: LimitOverrides,
  reset: Set<LimitName>,
): LimitOverrides {
  const next: LimitOverrides = { ...current };
  for (const name of reset) delete next[PROPERTY[name]];
  for (const [k, v] of Object.entries(set)) if (v !== undefined) Object.assign(next, { [k]: v });
  return next;
}

/** Whether an override sets nothing (its row can go). */
export const isEmpty = (o: LimitOverrides): boolean => Object.values(o).every((v) => v === undefined);

/** The limits of a key: its own override, else its partner's, else the service's defaults (field by field). */
export function resolveLimits(defaults: Limits, partner?: LimitOverrides, key?: LimitOverrides): Limits {
  return {
    read: key?.read ?? partner?.read ?? defaults.read,
    write: key?.write ?? partner?.write ?? defaults.write,
    snapshotConcurrency: partner?.snapshotConcurrency ?? defaults.snapshotConcurrency,
    disbursementsPerUserPerDay: partner?.disbursementsPerUserPerDay ?? defaults.disbursementsPerUserPerDay,
  };
}
