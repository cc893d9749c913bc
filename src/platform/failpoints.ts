/**
 * Crash points for fault tests: with `FAILPOINTS=payout.after_provider` (comma-separated names) in its
 * environment, a process kills itself with SIGKILL when it reaches that point, exactly as a crash would.
 * Without the variable (every real deployment) each point costs one Set lookup.
 */
const armed = new Set(
  (process.env.FAILPOINTS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
);

/** Dies here, at once and without cleanup, when this point is armed. */
export function failpoint(name: string): void {
  if (armed.has(name)) process.kill(process.pid, "SIGKILL");
}
