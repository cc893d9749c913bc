import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import { detached } from "../platform/telemetry.ts";
import { type LoggedCall, requestLogRepository } from "./request-log.repository.ts";

/** Why calls were left out of the log: `request_log_dropped_total{reason}`. */
export type DropReason = "buffer_full" | "write_failed";

/** Options for {@link createRequestLogWriter}. */
export interface RequestLogWriterOptions {
  /** An entity manager on the log's own connection (never one a request may be waiting for). */
  em: () => Em;
  logger: Logger;
  /** Calls held in memory at most while a write is slow; past it new calls are dropped, not queued. */
  maxBuffered?: number;
  /** Calls written per statement at most. */
  batchSize?: number;
  /** How long a call waits for others to share its write, when fewer than a batch are held. */
  lingerMs?: number;
  onWritten?: (n: number) => void;
  onDropped?: (reason: DropReason, n: number) => void;
}

/** What {@link createRequestLogWriter} returns. */
export interface RequestLogWriter {
  /** Takes a call to write. Never waits, never throws: a call the log cannot take is dropped and counted. */
  record(call: LoggedCall): void;
  /** Writes what is held, waiting at most `deadlineMs` (the service's stop). */
  drain(deadlineMs: number): Promise<void>;
}

/** At most one warning a minute about failed writes: a database that is away says so elsewhere already. */
const WARN_EVERY_MS = 60_000;

/**
 * The request log's writer: calls are held in memory and written in batches, one statement at a time on a
 * connection of the log's own, after their answers have gone. It never makes a call wait: when the database
 * falls behind, the buffer fills and further calls are dropped (and counted) until a write gets through; a write
 * that fails drops its batch. A hand-written batcher on the hot path, because every answered call passes here:
 * a push onto an array and, once per batch, a timer.
 */
export function createRequestLogWriter(o: RequestLogWriterOptions): RequestLogWriter {
  const maxBuffered = o.maxBuffered ?? 10_000;
  const batchSize = o.batchSize ?? 500;
  const lingerMs = o.lingerMs ?? 200;
  let held: LoggedCall[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> | undefined;
  let warnedAt = 0;

  // One batch of what is held, then more at once only while full batches wait: a write that took what came in
  // during the last one would write a few rows a statement, hundreds of statements a second.
  const writeAll = async (): Promise<void> => {
    for (let first = true; held.length && (first || held.length >= batchSize); first = false) {
      const batch = held.length <= batchSize ? held : held.slice(0, batchSize);
      held = held.length <= batchSize ? [] : held.slice(batchSize);
      try {
        await requestLogRepository.insert(o.em(), batch);
        o.onWritten?.(batch.length);
      } catch (err) {
        o.onDropped?.("write_failed", batch.length);
        if (Date.now() - warnedAt >= WARN_EVERY_MS) {
          warnedAt = Date.now();
          o.logger.warn("request log write failed; its calls are dropped", {
            calls: batch.length,
            err: (err as Error).message,
          });
        }
      }
    }
  };

  // Detached: a batch holds every partner's calls, so it is written in no partner's trace.
  const start = detached(() => {
    clearTimeout(timer);
    timer = undefined;
    if (writing) return;
    writing = writeAll().finally(() => {
      writing = undefined;
      // Calls that came while the last batch was written wait for their own linger, or a full batch.
      if (held.length) schedule();
    });
  });

  const schedule = () => {
    if (writing) return;
    if (held.length >= batchSize) start();
    else timer ??= setTimeout(start, lingerMs).unref();
  };

  return {
    record(call) {
      if (held.length >= maxBuffered) {
        o.onDropped?.("buffer_full", 1);
        return;
      }
      held.push(call);
      schedule();
    },
    async drain(deadlineMs) {
      const until = Date.now() + deadlineMs;
      while ((held.length || writing) && Date.now() < until) {
        start();
        let t: NodeJS.Timeout | undefined;
        await Promise.race([
          writing,
          new Promise((r) => {
            t = setTimeout(r, Math.max(0, until - Date.now()));
          }),
        ]);
        clearTimeout(t);
      }
    },
  };
}
