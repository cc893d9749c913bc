import type { BucketSpec } from "../ratelimit/limiters.service.ts";

/** The variables the configuration is read from: `process.env`, or a test's own. */
export type Env = Record<string, string | undefined>;

/** Thrown when the environment holds a value the service cannot run with. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** An integer from `min` to `max`; unset or empty is `fallback`. */
export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

/** A switch: 1/true/yes/on or 0/false/no/off, in any case; unset or empty is `fallback`. */
export function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (["1", "true", "yes", "on"].includes(raw.toLowerCase())) return true;
  if (["0", "false", "no", "off"].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** One of a fixed list of words; unset or empty is `fallback`. */
export function oneOf<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!values.includes(raw as T)) throw new ConfigError(`${name} must be one of ${values.join(", ")}`);
  return raw as T;
}

/** Parses a `capacity:refillPerSecond` bucket such as `500:100`. */
export function bucket(env: Env, name: string, fallback: BucketSpec): BucketSpec {
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

/** Refuses a set value that is not an absolute http(s) URL (a base URL the service builds links or calls on). */
export function checkHttpUrl(name: string, value: string | undefined): void {
  if (value !== undefined && !/^https?:\/\/[^/]+/.test(value)) {
    throw new ConfigError(`${name} must be an absolute http(s) URL`);
  }
}

/** A base URL without its trailing slashes, so paths can be appended with one. */
export const withoutTrailingSlash = (url: string): string => url.replace(/\/+$/, "");
