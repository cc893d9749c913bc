/** A usage mistake: printed with the usage, exit code 2. */
export class UsageError extends Error {}

/** Parsed command-line flags. */
export type Flags = Record<string, string | boolean | undefined>;

/** What a command prints: `json` with `--json`, else `text`. */
export type Output = { json: unknown; text: string };

/** A required flag's value, or a {@link UsageError} naming it. */
export function need(flags: Flags, name: string): string {
  const v = flags[name];
  if (typeof v !== "string" || v === "") throw new UsageError(`--${name} is required`);
  return v;
}

/**
 * A whole-number flag (undefined when absent and not required). Out of 32 bits is a usage error: it could not
 * be sent, and no limit of the service comes near it.
 */
export function int(flags: Flags, name: string, required: boolean): number | undefined {
  const v = flags[name];
  if (v === undefined && !required) return undefined;
  const n = Number(need(flags, name));
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be a whole number`);
  if (Math.abs(n) > 2_147_483_647) throw new UsageError(`--${name} is out of range`);
  return n;
}
