import type { PgBoss } from "pg-boss";
import type { Logger } from "../platform/logger.ts";
import type { SigningKeyService } from "./signing-key.service.ts";

const QUEUE = "signing-keys.maintain";

/** Every 15 minutes, on whichever worker's cron monitor fires: keep the rotation schedule. */
export const SIGNING_KEY_CRON = "*/15 * * * *";

/** Registers the signing-key maintenance worker and its schedule. */
export async function registerSigningKeyJobs(
  boss: PgBoss,
  signingKeys: SigningKeyService,
  logger: Logger,
): Promise<void> {
  await boss.work(QUEUE, { batchSize: 1 }, async () => {
    const created = await signingKeys.maintain();
    if (created.length) logger.info("created signing keys", { kids: created });
    return { created };
  });
  await boss.schedule(QUEUE, SIGNING_KEY_CRON, {}, { tz: "UTC" });
}
