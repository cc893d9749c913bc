import type { Jobs } from "../platform/jobs/jobs.ts";
import type { SandboxFixtures } from "./fixtures.ts";

/** Hourly: the fixture users' ledger is topped up to yesterday (CONTRACT.md §7). */
export async function registerSandboxJobs(jobs: Jobs, fixtures: SandboxFixtures): Promise<void> {
  await jobs.work("sandbox.fixtures", { batchSize: 1 }, (em) => fixtures.ensure(em));
  await jobs.schedule("sandbox.fixtures", "17 * * * *", {});
}
