import type { PgBoss } from "pg-boss";
import type { Logger } from "../platform/logger.ts";
import type { ConsentService } from "./consent.service.ts";

/** Every minute: consents past `expiresAt` become EXPIRED, each with `consent.revoked` (SYSTEM). */
export async function registerConsentJobs(
  boss: PgBoss,
  consents: ConsentService,
  logger: Logger,
): Promise<void> {
  await boss.work("consents.expire", { batchSize: 1 }, async () => {
    let expired = 0;
    for (let batch = await consents.expireDue(); batch > 0; batch = await consents.expireDue())
      expired += batch;
    if (expired) logger.info("expired consents", { count: expired });
    return { expired };
  });
  await boss.schedule("consents.expire", "* * * * *", {}, { tz: "UTC" });
}
