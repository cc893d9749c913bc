import os from "node:os";
import path from "node:path";
import { defineConfig } from "vitest/config";
import { SlowestFirst } from "./test/support/slow-first.ts";

// Files whose assertions bound what the service does in time, under a load they make themselves, with too
// little room to share the machine with other files: a saturated pool whose readiness probe has 1 s to answer
// (or whose own holders have 200 ms to get a connection), processes killed and PostgreSQL stopped while mandates
// race a skewed clock, retries due within a second, a partner's call beside a burst of real password hashes,
// four test sends within the two seconds their bucket refills a token in, timers within 50 ms. They run one at a
// time, after the rest, so no other file's load is counted against them; so do the primary restarted under load
// behind a pooler and beside a replica, and a replica gone silent under reads. (The other faults and hostile
// files, the webhook fairness among them, have kept their bounds on a machine loaded far beyond what four files
// make.)
const alone = [
  "test/faults/failover.test.ts",
  "test/faults/faults.test.ts",
  "test/faults/pool.test.ts",
  "test/faults/replica-silence.test.ts",
  "test/faults/retry-punctuality.test.ts",
  "test/faults/unit-of-work.test.ts",
  "test/hostile/portal-signin-burst.test.ts",
  "test/hostile/webhook-send-limits.test.ts",
  "test/unit/wake-timer.test.ts",
];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    // Fails any test in which a network call starts inside a database transaction (platform/network-guard.ts).
    setupFiles: ["test/support/network-tripwire.ts"],
    pool: "forks",
    // New portal passwords are hashed at 2^12 rather than OWASP's 2^17 (test/README.md): the tests of the
    // hashing limits set the real cost for themselves.
    env: {
      TEST_PASSWORD_HASH_LOG_N: "12",
      // The service processes, command-line runs and scripts the tests start (hundreds, all on the same
      // sources) keep Node's compiled code here and start on it rather than compiling the sources again.
      NODE_COMPILE_CACHE: path.join(os.tmpdir(), "partner-api-test-compile-cache"),
    },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default"],
    // The slowest files first, so none of them is left to start when the rest are done (test/support/slow-first.ts).
    sequence: { sequencer: SlowestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: "suite",
          include: ["test/**/*.test.ts"],
          exclude: alone,
          // Each file gets its own database cloned from a migrated template, so files run in parallel: four at a
          // time whatever the machine (vitest's default, cores - 1, runs one at a time on 2-core machines, where
          // most files spend their time waiting on the service, a receiver, a browser or a clock). A test here
          // must not depend on how fast the machine is: it waits on events, never on a deadline it did not set.
          fileParallelism: true,
          maxWorkers: 4,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "alone",
          include: alone,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
