import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Fails any test in which a network call starts inside a database transaction (platform/network-guard.ts).
    setupFiles: ["test/support/network-tripwire.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file gets its own database cloned from a migrated template, so files run in parallel.
    fileParallelism: true,
    // Two files at a time whatever the machine: vitest's default (cores - 1) runs one at a time on the 2-core CI
    // machines, where most files spend their time waiting on the service, a receiver or a clock; two at a time
    // took the suite from about 10 to about 6 minutes there with every test passing.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
