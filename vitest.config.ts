import os from "node:os";
import path from "node:path";
import { defineConfig } from "vitest/config";
import { SlowestFirst } from "./test/support/slow-first.ts";

// Files whose assertions bound how long the service takes under a load they make themselves (a pool they
// saturate, crashes and restarts, a burst of password hashes beside a bystander's call, 21,000 connections,
// delivery lateness): they run one at a time, after the rest, so no other file's load is counted against them.
const alone = [
  "test/faults/faults.test.ts",
  "test/faults/pool.test.ts",
  "test/faults/retry-punctuality.test.ts",
  "test/faults/silent-change-feed.test.ts",
  "test/faults/silent-database.test.ts",
  "test/faults/unit-of-work.test.ts",
  "test/hostile/webhook-fairness.test.ts",
  "test/hostile/portal.test.ts",
  "test/hostile/idle-connections.test.ts",
  "test/hostile/webhook-portal.test.ts",
  "test/e2e/dedicated-capacity.test.ts",
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
