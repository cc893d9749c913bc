import type { PurgeStep } from "../retention/retention.service.ts";
import { requestLogRepository } from "./request-log.repository.ts";

/**
 * The request log's days: the hourly run keeps the next days' partitions made, and drops each day wholly past
 * the 30 days the log keeps (a detach and a drop, whatever the day held; nothing is deleted row by row).
 */
export const requestLogPurge: PurgeStep = {
  name: "request_log",
  // The log keeps its own 30 days, whatever RETENTION_DAYS says: the cut-off given is the run's now.
  retention: "now",
  async dropWhole(em, now) {
    await requestLogRepository.ensurePartitions(em, now);
    return { dropped: await requestLogRepository.dropExpired(em, now), deleted: {} };
  },
  async batch() {
    return { picked: 0, deleted: {} };
  },
};
