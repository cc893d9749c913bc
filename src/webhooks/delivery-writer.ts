import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { detached } from "../platform/telemetry.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { CircuitView } from "./circuit-view.ts";
import { type EndedAttempt, type Recorded, type RecordOptions, recordBatch } from "./delivery-record.ts";
import type { ClaimedDelivery, RecordedAttempt } from "./delivery-worker.repository.ts";

/** Attempt outcomes and parked deliveries written in one transaction at most (group commit). */
const WRITE_BATCH = 200;
/**
 * How long a write waits for others to share its transaction when fewer than a batch are queued: at a thousand
 * attempts a second, a commit (and its WAL flush) per attempt would cost the database more than the attempts.
 * Nothing a partner sees waits for it: the attempt was made, only its record is this much later.
 */
const LINGER_MS = 10;

/** Why a claimed delivery was not attempted at once but moved to a later time. */
export type DeferReason = "capacity" | "circuit";

/** What the worker reports of each recorded attempt (for the metrics). */
export interface AttemptReport {
  firstAttempt: boolean;
  sinceCreatedMs: number;
  /** Attempt start minus the time it was scheduled for (retries and deferred deliveries only). */
  lateMs: number | undefined;
  ok: boolean;
  latencyMs: number;
  outcome: "delivered" | "retrying" | "given_up";
}

/** A claimed delivery as the writer needs it: the row, and who waits for it to be written. */
export interface Written {
  d: ClaimedDelivery;
  settle: (() => void) | undefined;
}

/** An attempt that ended, or a claimed delivery to move to a later time (`release`: now, to another worker). */
export type Write<I extends Written> =
  | ({ kind: "attempt"; item: I } & Omit<EndedAttempt, "d">)
  | { kind: "park"; item: I; at: Date; reason: DeferReason | "release" };

/** Options for {@link createDeliveryWriter}. */
export interface DeliveryWriterOptions extends RecordOptions {
  clock: Clock;
  logger: Logger;
  view: CircuitView;
  /** Wakes a delivery at its next time, in this process. */
  wakeAt: (id: string, environment: Environment, at: Date, now: Date) => void;
  /** Keeps the write's promise for the worker's stop. */
  track: (p: Promise<unknown>) => void;
  onAttempt?: ((a: AttemptReport) => void) | undefined;
  onDeferred?: ((reason: DeferReason, count: number) => void) | undefined;
}

/**
 * One environment's writer: attempts are recorded and deliveries parked one transaction at a time, each taking
 * everything that ended meanwhile (so an attempt is recorded within milliseconds of its end, never waiting for a
 * slower one), then the circuits, wake-ups and metrics follow from what was written.
 */
export function createDeliveryWriter<I extends Written>(o: DeliveryWriterOptions) {
  const writes: Write<I>[] = [];
  let writing = false;

  // Detached: the loop writes every partner's attempts, so it runs in no partner's trace.
  const drain = detached(() => {
    if (writing || writes.length === 0) return;
    writing = true;
    let batch: Write<I>[] = [];
    o.track(
      (async () => {
        if (writes.length < WRITE_BATCH) await new Promise((resolve) => setTimeout(resolve, LINGER_MS));
        batch = writes.splice(0, WRITE_BATCH);
        await flush(o, batch);
      })().finally(() => {
        writing = false;
        for (const x of batch) x.item.settle?.();
        drain();
      }),
    );
  });

  return {
    /** Queues a write; it goes in the next transaction. */
    write(w: Write<I>): void {
      writes.push(w);
      drain();
    },
  };
}

/** Writes one batch in one transaction, then updates the circuits, wakes the retries and reports. */
async function flush<I extends Written>(o: DeliveryWriterOptions, batch: Write<I>[]): Promise<void> {
  const attempts: EndedAttempt[] = [];
  const parks: { d: ClaimedDelivery; at: Date }[] = [];
  const deferred = { capacity: 0, circuit: 0 };
  for (const w of batch) {
    if (w.kind === "attempt") attempts.push({ ...w, d: w.item.d });
    else {
      parks.push({ d: w.item.d, at: w.at });
      if (w.reason !== "release") deferred[w.reason]++;
    }
  }
  const now = o.clock.now();
  let recorded: Recorded | undefined;
  try {
    recorded = await recordBatch(o, attempts, parks);
  } catch (err) {
    o.logger.error(
      "could not record webhook attempts; their deliveries are tried again once their claims lapse",
      {
        err,
        attempts: attempts.length,
        parked: parks.length,
      },
    );
  }
  circuits(o, attempts, recorded);
  if (!recorded) return;
  for (const x of recorded.rows) {
    if (x.next) o.wakeAt(x.d.id, x.d.environment, x.next, now);
    o.onAttempt?.(report(x));
  }
  for (const p of recorded.parked) o.wakeAt(p.id, p.environment, p.at, now);
  for (const reason of ["capacity", "circuit"] as const) {
    if (deferred[reason] > 0) o.onDeferred?.(reason, deferred[reason]);
  }
}

/** What the metrics are told of a recorded attempt. */
function report(x: RecordedAttempt): AttemptReport {
  const d = x.d;
  return {
    firstAttempt: d.attempts === 0,
    sinceCreatedMs: x.startedAt.getTime() - d.created_at.getTime(),
    lateMs:
      d.next_attempt_at.getTime() > d.created_at.getTime()
        ? x.startedAt.getTime() - d.next_attempt_at.getTime()
        : undefined,
    ok: x.r.ok,
    latencyMs: x.r.latencyMs,
    outcome: x.status === "DELIVERED" ? "delivered" : x.status === "FAILED" ? "retrying" : "given_up",
  };
}

/** Says when a circuit opened or closed, and hands the database's view of each circuit to the process's. */
function circuits(o: DeliveryWriterOptions, attempts: EndedAttempt[], recorded: Recorded | undefined): void {
  for (const c of recorded?.circuits ?? []) {
    const state = recorded?.states.get(c.webhookId);
    if (state?.circuit_probe_at && state.failure_streak - c.failures < o.circuit.threshold) {
      o.logger.info("webhook circuit opened", {
        webhookId: c.webhookId,
        failures: state.failure_streak,
        nextProbeAt: state.circuit_probe_at,
      });
    } else if (c.closes && !state?.circuit_probe_at) {
      o.logger.info("webhook circuit closed", { webhookId: c.webhookId });
    }
  }
  const counts = new Map<string, number>();
  for (const a of attempts) counts.set(a.d.webhook_id, (counts.get(a.d.webhook_id) ?? 0) + 1);
  for (const [id, count] of counts) {
    o.view.afterRecord(o.view.of(id), count, recorded?.states.get(id), recorded !== undefined);
  }
}
