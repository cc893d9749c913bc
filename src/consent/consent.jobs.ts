import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { ConsentService } from "./consent.service.ts";

/** Every minute: consents past `expiresAt` become EXPIRED, each with `consent.revoked` (SYSTEM). */
export async function registerConsentJobs(
  jobs: Jobs,
  consents: ConsentService,
  logger: Logger,
): Promise<void> {
  await jobs.work("consents.expire", { batchSize: 1 }, async (em) => {
    let expired = 0;
    for (let batch = await consents.expireDue(em); batch > 0; batch = await consents.expireDue(em))
      expired += batch;
    if (expired) logger.info("expired consents", { count: expired });
    return { expired };
  });
  await jobs.schedule("consents.expire", "* * * * *", {});
}
