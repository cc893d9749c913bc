import type { Clock } from "../platform/clock.ts";
import { createOrm, type DbTimeouts, type Schema } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { requestLogRepository } from "./request-log.repository.ts";
import { createRequestLogWriter, type RequestLogWriter } from "./request-log.writer.ts";

/** What {@link openRequestLog} needs: where the primary is, and how the service's sessions are set up. */
export interface RequestLogOptions {
  databaseUrl: string;
  pooled: boolean;
  schema: Schema;
  timeouts: DbTimeouts;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

/** A statement of the log's writes may take this long at most: a batch of 500 rows takes milliseconds. */
const WRITE_STATEMENT_MS = 5_000;

/**
 * The request log's writer on a connection of its own (`partner-api request log`), so a slow write never holds
 * a connection a request is waiting for; today's partition and the next days' made first (the housekeeping then
 * keeps them ahead). Roles `api` and `all`: the processes that answer partners.
 */
export async function openRequestLog(
  o: RequestLogOptions,
): Promise<{ writer: RequestLogWriter; close(): Promise<void> }> {
  const orm = await createOrm({
    databaseUrl: o.databaseUrl,
    schema: o.schema,
    poolSize: 1,
    logger: o.logger,
    timeouts: { ...o.timeouts, statementMs: Math.min(o.timeouts.statementMs, WRITE_STATEMENT_MS) },
    pooled: o.pooled,
    applicationName: "partner-api request log",
  });
  try {
    await requestLogRepository.ensurePartitions(orm.em.fork(), o.clock.now());
  } catch (err) {
    await orm.close();
    throw err;
  }
  const writer = createRequestLogWriter({
    em: () => orm.em.fork(),
    logger: o.logger,
    onWritten: (n) => o.metrics.requestLogWritten.inc({}, n),
    onDropped: (reason, n) => o.metrics.requestLogDropped.inc({ reason }, n),
  });
  return {
    writer,
    async close() {
      await writer.drain(5_000);
      await orm.close();
    },
  };
}
