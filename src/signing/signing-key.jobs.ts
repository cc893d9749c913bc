import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { SigningKeyService } from "./signing-key.service.ts";

/** Every 15 minutes, on whichever worker's cron monitor fires: keep the rotation schedule. */
export const SIGNING_KEY_CRON = "*/15 * * * *";

/** Registers the signing-key maintenance worker and its schedule. */
export async function registerSigningKeyJobs(
  jobs: Jobs,
  signingKeys: SigningKeyService,
  logger: Logger,
): Promise<void> {
  await jobs.work("signing-keys.maintain", { batchSize: 1 }, async (em) => {
    const created = await signingKeys.maintain(em);
    if (created.length) logger.info("created signing keys", { kids: created });
    return { created };
  });
  await jobs.schedule("signing-keys.maintain", SIGNING_KEY_CRON, {});
}
