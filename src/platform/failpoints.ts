/**
 * Fault points for fault tests. `FAILPOINTS` (comma-separated) arms points by name, each with what it does
 * there: `payout.after_provider` (or `…:kill`) kills the process with SIGKILL, exactly as a crash would;
 * `healthz:reject` leaves a rejected promise nobody handles; `healthz:throw` throws from a timer, an
 * exception that reaches the event loop. The last two exercise the process's last-resort policy (main.ts).
 * Without the variable (every real deployment) each point costs one Map lookup.
 */
type Action = "kill" | "reject" | "throw";
const armed = new Map<string, Action>(
  (process.env.FAILPOINTS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s): [string, Action] => {
      const [name = "", action = "kill"] = s.split(":");
      if (action !== "kill" && action !== "reject" && action !== "throw")
        throw new Error(`FAILPOINTS: ${s}: the action is kill, reject or throw`);
      return [name, action];
    }),
);

/** Fails here, in the armed way, when this point is armed. */
export function failpoint(name: string): void {
  const action = armed.get(name);
  if (action === undefined) return;
  const err = new Error(`failpoint ${name}`);
  if (action === "kill") process.kill(process.pid, "SIGKILL");
  // A bug's shape: a promise whose rejection nobody awaits.
  else if (action === "reject") void Promise.reject(err);
  else
    setImmediate(() => {
      throw err;
    });
}
