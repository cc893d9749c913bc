import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Environment } from "../platform/tenancy.ts";
import {
  type CircuitState,
  type ClaimedDelivery,
  type RecordedAttempt,
  deliveryWorkerRepository as repo,
} from "./delivery-worker.repository.ts";
import type { Outbox, WakeUp } from "./outbox.service.ts";
import { nextAttemptAt, parseRetryAfter } from "./schedule.ts";
import type { AttemptResult } from "./sender.ts";
import { webhookRepository } from "./webhook.repository.ts";

/** An attempt that ended, to record. */
export interface EndedAttempt {
  d: ClaimedDelivery;
  result: AttemptResult;
  startedAt: Date;
  endedAt: Date;
  /** It succeeded while the worker saw the circuit open (a probe, most often). */
  closes: boolean;
}

/** A claimed delivery to move to a later time, letting go of the claim. */
export interface Parking {
  d: ClaimedDelivery;
  at: Date;
}

/** One subscription's attempts in a batch, for its circuit. */
export interface CircuitChange {
  webhookId: string;
  /** One of them succeeded: the streak restarts from the failures after it. */
  reset: boolean;
  failures: number;
  count: number;
  closes: boolean;
}

/** What {@link recordBatch} wrote. */
export interface Recorded {
  rows: RecordedAttempt[];
  circuits: CircuitChange[];
  /** The circuits the database changed (absent: closed, nothing to change). */
  states: Map<string, CircuitState>;
  /** The deliveries parked (those still under the worker's claim), with their times. */
  parked: { id: string; environment: Environment; at: Date }[];
}

/** Options for {@link recordBatch}. */
export interface RecordOptions {
  clock: Clock;
  outbox: Outbox;
  fork: () => Em;
  circuit: { threshold: number; minWaitMs: number; maxWaitMs: number };
}

/** The delivery's state after an attempt: delivered, failed with its next attempt, or given up. */
function outcome(a: EndedAttempt): RecordedAttempt {
  const { d, result: r, startedAt, endedAt } = a;
  const n = d.attempts + 1;
  const next =
    r.ok || r.statusCode === 410
      ? undefined
      : nextAttemptAt({
          attempts: n,
          now: endedAt,
          createdAt: d.created_at,
          retryAfterSeconds:
            r.statusCode === 429 || r.statusCode === 503 ? parseRetryAfter(r.retryAfter, endedAt) : undefined,
        });
  return { d, r, startedAt, attempts: n, next, status: r.ok ? "DELIVERED" : next ? "FAILED" : "GIVEN_UP" };
}

/** Each subscription's run of failures, in the order the attempts ended: a success starts it again. */
function circuitChanges(attempts: EndedAttempt[]): CircuitChange[] {
  const circuits = new Map<string, CircuitChange>();
  for (const { d, result, closes } of attempts) {
    const c = circuits.get(d.webhook_id) ?? {
      webhookId: d.webhook_id,
      reset: false,
      failures: 0,
      count: 0,
      closes: false,
    };
    c.count++;
    c.closes ||= closes;
    if (result.ok) {
      c.reset = true;
      c.failures = 0;
    } else c.failures++;
    circuits.set(d.webhook_id, c);
  }
  return [...circuits.values()];
}

/**
 * Records attempts that ended (each attempt, the delivery's new state, its subscription's circuit, the retry's
 * wake-up; a 410 disables the subscription) and parks deliveries, in one short transaction: a group commit of
 * what ended at about the same moment, never waiting for an attempt still under way. Run again after a failure
 * (a dropped connection, a failover), twice at most; then it throws.
 */
export async function recordBatch(
  o: RecordOptions,
  attempts: EndedAttempt[],
  parks: Parking[],
): Promise<Recorded> {
  const now = o.clock.now();
  const rows = attempts.map(outcome);
  const circuits = circuitChanges(attempts);
  const parkAt = new Map(parks.map((p) => [p.d.id, p.at]));
  // Wake-ups run on the database clock: the same delay from it.
  const dbTime = (at: Date) => new Date(Date.now() + (at.getTime() - now.getTime()));
  let states: CircuitState[] = [];
  let parked: { id: string; environment: Environment }[] = [];
  await retrying(() =>
    o.fork().transactional(async (tx) => {
      await repo.recordAttempts(tx, rows, now);
      states = await repo.updateCircuits(tx, circuits, now, o.circuit);
      // 410 Gone: the subscription is disabled and nothing more is sent to it.
      const gone = [...new Set(rows.filter((x) => x.r.statusCode === 410).map((x) => x.d.webhook_id))];
      await repo.disableWebhooks(tx, gone, "the endpoint answered 410 Gone", now);
      await webhookRepository.giveUpDeliveries(tx, gone, now);
      parked = await repo.parkDeliveries(
        tx,
        parks.map((p) => ({ id: p.d.id, at: p.at, token: p.d.lease_token })),
      );
      const wake: WakeUp[] = [
        ...rows
          .filter((x) => x.next)
          .map((x) => ({ id: x.d.id, environment: x.d.environment, startAfter: dbTime(x.next as Date) })),
        ...parked.map((p) => ({
          id: p.id,
          environment: p.environment,
          startAfter: dbTime(parkAt.get(p.id) as Date),
        })),
      ];
      await o.outbox.enqueue(tx, wake);
    }),
  );
  return {
    rows,
    circuits,
    states: new Map(states.map((s) => [s.id, s])),
    parked: parked.map((p) => ({ ...p, at: parkAt.get(p.id) as Date })),
  };
}

async function retrying<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 2) throw err;
      await new Promise((resolve) => setTimeout(resolve, attempt === 0 ? 250 : 1_000));
    }
  }
}
