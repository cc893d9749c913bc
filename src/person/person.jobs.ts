import type { Jobs } from "../platform/jobs/jobs.ts";
import type { PersonService } from "./person.service.ts";

/** Hourly: one-time codes older than a day are deleted (their limits look back a day at most). */
export async function registerPersonJobs(jobs: Jobs, person: PersonService): Promise<void> {
  await jobs.work("person.purge", { batchSize: 1 }, async (em) => ({ purged: await person.purge(em) }));
  await jobs.schedule("person.purge", "17 * * * *", {});
}
