import type { Context } from "@opentelemetry/api";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { Environment } from "../platform/tenancy.ts";
import { CIRCUIT_MIN_WAIT_MS, type CircuitView, createCircuitView } from "./circuit-view.ts";
import {
  admit,
  type Dispatch,
  type Item,
  type Lane,
  LEASE_MARGIN_MS,
  release,
  wakeDue,
} from "./delivery-dispatch.ts";
import { deliveryWorkerRepository as repo } from "./delivery-worker.repository.ts";
import { type AttemptReport, createDeliveryWriter, type DeferReason } from "./delivery-writer.ts";
import { FairQueue } from "./fair-queue.ts";
import type { Outbox } from "./outbox.service.ts";
import type { Sender } from "./sender.ts";
import { createTaskTracker, type TaskTracker } from "./task-tracker.ts";
import { createWakeTimer, type WakeTimer } from "./wake-timer.ts";
import { createSecretOpener, secretAad } from "./webhook-secrets.ts";

export type { DeferReason };
export { CIRCUIT_MIN_WAIT_MS, secretAad };

/** How many attempts one worker process has in flight at once (docs/operations.md). */
export interface DeliveryLimits {
  /** Per environment: sandbox and production each have this many, so neither starves the other. */
  maxInFlight: number;
  /** To one partner's subscriptions, per environment. */
  maxInFlightPerPartner: number;
  /** To one subscription (one destination URL). */
  maxInFlightPerDestination: number;
}

/** When a subscription's circuit opens, and how long it waits between probes. */
export interface CircuitPolicy {
  /** Consecutive failed attempts that open it. */
  threshold: number;
  /** The longest wait between probes. */
  maxWaitMs: number;
}

/** Options for {@link createDeliveryWorker}. */
export interface DeliveryWorkerOptions {
  clock: Clock;
  box: SecretBox;
  sender: Sender;
  outbox: Outbox;
  logger: Logger;
  /** A fresh unit of work for the worker's own short writes (attempts, parked deliveries, probes). */
  fork: () => Em;
  limits: DeliveryLimits;
  circuit: CircuitPolicy;
  /** The longest one attempt can take: resolving and connecting, then the request. */
  attemptMs: number;
  /**
   * How long a claimed delivery may wait in this process for a free slot; past it (or when it is clear it
   * would), it waits in the database instead, its claim given up.
   */
  holdMs: number;
  /** How overdue a delivery must be before the sweeper re-queues it. */
  sweepGraceMs: number;
  /** Called once per recorded attempt. */
  onAttempt?: (a: AttemptReport) => void;
  /** Called when deliveries are moved to a later time instead of being attempted now. */
  onDeferred?: (reason: DeferReason, count: number) => void;
}

/** Sends due deliveries and records what happened; the delivery row is the truth, jobs only wake it. */
export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;

/**
 * Creates the delivery worker. Wake-ups (queued jobs, and an in-process timer for attempts this process
 * scheduled) claim deliveries; claimed deliveries wait for a slot in their environment's {@link FairQueue}
 * (limits per environment, partner and subscription, partners served in turn); each attempt is recorded as soon
 * as it ends, in a short transaction shared only with attempts that ended at the same moment; a subscription
 * whose attempts keep failing has its circuit opened, and its deliveries wait in the database while one probe at
 * a time goes (delivery-dispatch.ts).
 */
export function createDeliveryWorker(o: DeliveryWorkerOptions) {
  const tasks = createTaskTracker(o.logger);
  const view = createCircuitView(o.circuit.threshold);
  // Attempts this process scheduled wake here on time; pg-boss gives delayed jobs no NOTIFY, so they would
  // otherwise wait for the queue's next poll. Their queued jobs stay as the fallback (another process, a restart).
  const wakeups = createWakeTimer<{ id: string; environment: Environment }>({
    capacity: 10_000,
    horizonMs: 15 * ms.minute,
    wake: (due) => wakeDue(w, due),
  });
  const wakeAt = (id: string, environment: Environment, at: Date, now: Date) => {
    if (!w.stopped) wakeups.add({ id, environment }, at.getTime() - now.getTime());
  };
  const w: Dispatch = {
    clock: o.clock,
    logger: o.logger,
    sender: o.sender,
    fork: o.fork,
    limits: o.limits,
    holdMs: o.holdMs,
    attemptMs: o.attemptMs,
    leaseMs: o.holdMs + o.attemptMs + LEASE_MARGIN_MS,
    maxHeld: Math.max(1_000, 20 * o.limits.maxInFlight),
    view,
    lanes: { sandbox: newLane(o, view, wakeAt, tasks), production: newLane(o, view, wakeAt, tasks) },
    openSecret: createSecretOpener(o.box),
    track: tasks.track,
    stopped: false,
    tidy: undefined,
  };

  return {
    /** Claims and lines up due deliveries among `ids` (a batch of wake-ups); resolves once they are claimed. */
    admit: (em: Em, ids: string[], traces?: ReadonlyMap<string, Context | undefined>) =>
      admit(w, em, ids, false, traces),

    /**
     * Makes one attempt for each due delivery among `ids` (the others are left alone) and resolves once each is
     * recorded, or parked (its subscription's circuit open, or no slot in time). No transaction is open while
     * an endpoint is called: the claim commits first, the outcome is recorded after.
     */
    processBatch: (em: Em, ids: string[]) => admit(w, em, ids, true),

    /**
     * Re-queues deliveries that are overdue and held by no worker (their wake-up was lost, the worker holding
     * them died, or the workers are far behind). One sweeper runs at a time across all instances.
     */
    sweep: (em: Em, limit = 1_000): Promise<number> => sweep(o, em, limit),

    /** Attempts in flight and deliveries waiting for a slot in this process, per environment. */
    load(): Record<Environment, { inFlight: number; waiting: number }> {
      const of = (lane: Lane) => ({ inFlight: lane.queue.inFlight, waiting: lane.queue.waiting });
      return { sandbox: of(w.lanes.sandbox), production: of(w.lanes.production) };
    },

    /**
     * Stops: no more claims; deliveries waiting here are let go (re-queued now, for another worker); attempts in
     * flight end and are recorded, for up to `timeoutMs`. An attempt still running then is tried again by
     * another worker once its claim lapses.
     */
    stop: (timeoutMs = 10_000): Promise<void> => stop(w, wakeups, tasks, timeoutMs),
  };
}

/** One environment's fair queue and the writer that records its attempts. */
function newLane(
  o: DeliveryWorkerOptions,
  view: CircuitView,
  wakeAt: (id: string, environment: Environment, at: Date, now: Date) => void,
  tasks: TaskTracker,
): Lane {
  return {
    queue: new FairQueue<Item>({
      total: o.limits.maxInFlight,
      perPartner: o.limits.maxInFlightPerPartner,
      perDestination: o.limits.maxInFlightPerDestination,
    }),
    write: createDeliveryWriter<Item>({
      clock: o.clock,
      outbox: o.outbox,
      fork: o.fork,
      circuit: {
        threshold: o.circuit.threshold,
        minWaitMs: CIRCUIT_MIN_WAIT_MS,
        maxWaitMs: o.circuit.maxWaitMs,
      },
      logger: o.logger,
      view,
      wakeAt,
      track: tasks.track,
      onAttempt: o.onAttempt,
      onDeferred: o.onDeferred,
    }).write,
  };
}

/** Re-queues overdue deliveries no worker holds, if no other instance's sweeper is at it; returns how many. */
function sweep(o: DeliveryWorkerOptions, em: Em, limit: number): Promise<number> {
  return em.transactional(async (tx) => {
    if (!(await repo.tryLockSweeper(tx))) return 0;
    const due = await repo.overdueDeliveries(tx, o.clock.now(), o.sweepGraceMs, limit);
    await o.outbox.enqueue(tx, due);
    if (due.length > 0) {
      o.logger.info("re-queued overdue webhook deliveries", {
        count: due.length,
        production: due.filter((d) => d.environment === "production").length,
        sandbox: due.filter((d) => d.environment === "sandbox").length,
      });
    }
    return due.length;
  });
}

/** Stops claiming, lets go of what waits here, and waits up to `timeoutMs` for the attempts in flight. */
async function stop(
  w: Dispatch,
  wakeups: Pick<WakeTimer<unknown>, "clear">,
  tasks: TaskTracker,
  timeoutMs: number,
): Promise<void> {
  if (w.stopped) return;
  w.stopped = true;
  if (w.tidy) clearInterval(w.tidy);
  wakeups.clear();
  for (const lane of Object.values(w.lanes)) {
    for (const item of lane.queue.remove(() => true)) release(lane, item);
  }
  await tasks.settle(Date.now() + timeoutMs);
  if (tasks.size > 0) {
    w.logger.warn(
      "stopped with webhook attempts still under way; they are tried again once their claims lapse",
      {
        count: tasks.size,
      },
    );
  }
}
