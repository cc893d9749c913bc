import { type Context, ROOT_CONTEXT } from "@opentelemetry/api";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import { detached, inSpan, tracingOn } from "../platform/telemetry.ts";
import { type Environment, environments } from "../platform/tenancy.ts";
import { CIRCUIT_MIN_WAIT_MS, type CircuitView, type Hook } from "./circuit-view.ts";
import type { DeliveryLimits } from "./delivery.worker.ts";
import {
  type ClaimedDelivery as Claimed,
  deliveryWorkerRepository as repo,
} from "./delivery-worker.repository.ts";
import type { Write } from "./delivery-writer.ts";
import type { FairQueue } from "./fair-queue.ts";
import { retrySchedule } from "./schedule.ts";
import type { AttemptResult, Sender } from "./sender.ts";
import { signatureHeaders } from "./signature.ts";
import { webhookRepository } from "./webhook.repository.ts";

/** A claim outlives the hold and the longest attempt by this much, so a live worker never loses one. */
export const LEASE_MARGIN_MS = 5 * ms.second;
/** The shortest wait of a delivery parked for want of capacity. */
const MIN_PARK_MS = ms.second;

/** A claimed delivery waiting in this process, or in flight. */
export interface Item {
  partnerId: string;
  /** The subscription: one destination URL. */
  destinationId: string;
  d: Claimed;
  /** `Date.now()` by which its attempt must start (its claim must outlast the attempt), else it is parked. */
  startBy: number;
  /** Ends the wait of {@link admit} with `wait` for it. */
  settle: (() => void) | undefined;
  /** With tracing on, the trace its event was raised in, which its attempt continues. */
  trace?: Context | undefined;
}

/** One environment's capacity, and the writer that records its attempts. */
export interface Lane {
  queue: FairQueue<Item>;
  write: (w: Write<Item>) => void;
}

/**
 * What one delivery worker dispatches with: its limits, its view of the circuits, a lane per environment, and
 * whether it is stopping. The functions below decide, for each claimed delivery, whether it is attempted now,
 * goes as its circuit's probe, waits in line here, or waits in the database (parked, its claim given up).
 */
export interface Dispatch {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly sender: Sender;
  /** A fresh unit of work for the worker's own short writes (attempts, parked deliveries, probes). */
  readonly fork: () => Em;
  readonly limits: DeliveryLimits;
  /** How long a claimed delivery may wait in this process for a free slot. */
  readonly holdMs: number;
  /** The longest one attempt can take. */
  readonly attemptMs: number;
  /** How long a claim lasts: the hold, then the attempt, then a margin. */
  readonly leaseMs: number;
  /** Claimed deliveries one lane holds at most; past it, more are parked in the database. */
  readonly maxHeld: number;
  readonly view: CircuitView;
  readonly lanes: Record<Environment, Lane>;
  /** A subscription's secret, opened (cached). */
  readonly openSecret: (webhookId: string, enc: Buffer) => string;
  /** Keeps a started promise for the worker's stop. */
  readonly track: (p: Promise<unknown>) => void;
  stopped: boolean;
  /** The timer that parks what waited here too long; started by the first claim. */
  tidy: NodeJS.Timeout | undefined;
}

/** Claims the deliveries whose in-process wake-up came, one environment at a time. */
export function wakeDue(w: Dispatch, due: { id: string; environment: Environment }[]): void {
  for (const environment of environments) {
    const ids = due.filter((x) => x.environment === environment).map((x) => x.id);
    if (ids.length === 0 || w.stopped) continue;
    w.track(
      admit(w, w.fork(), ids).catch((err: unknown) =>
        w.logger.warn("webhook wake-up failed; its queued job or the sweeper brings it", { err }),
      ),
    );
  }
}

/** Parks what has waited here as long as its claim allows. */
export function expire(w: Dispatch): void {
  const t = Date.now();
  for (const lane of Object.values(w.lanes)) {
    if (lane.queue.waiting === 0) continue;
    for (const item of lane.queue.remove((x) => x.startBy <= t)) defer(w, lane, item);
  }
}

/** Moves a claimed delivery to a later time in the database, letting go of it (its claim, its slot). */
function defer(w: Dispatch, lane: Lane, item: Item, waitMs = 0): void {
  const hook = w.view.of(item.destinationId);
  const now = w.clock.now().getTime();
  const deadline = item.d.created_at.getTime() + retrySchedule.windowMs;
  if (hook.probeAt !== null && now < deadline) {
    // Open circuit: until the next probe, spread over a second; never past the last attempt's time.
    const at = Math.min(Math.max(hook.probeAt, now) + Math.floor(Math.random() * ms.second), deadline);
    lane.write({ kind: "park", item, at: new Date(at), reason: "circuit" });
    return;
  }
  // No free slot in time: after the deliveries in front of it, as this endpoint answers now.
  const at = Math.max(now + Math.max(MIN_PARK_MS, waitMs), hook.parkCursor);
  hook.parkCursor = at + w.view.latencyOf(hook) / w.limits.maxInFlightPerDestination;
  lane.write({ kind: "park", item, at: new Date(at), reason: "capacity" });
}

/** Lets another worker take a claimed delivery now (this one is stopping). */
export function release(lane: Lane, item: Item): void {
  lane.write({ kind: "park", item, at: item.d.next_attempt_at, reason: "release" });
}

/** Starts what may start in a lane: partners in turn, within every limit. */
function pump(w: Dispatch, lane: Lane): void {
  if (w.stopped) return;
  for (let item = lane.queue.next(w.view.probing); item; item = lane.queue.next(w.view.probing)) {
    const hook = w.view.of(item.destinationId);
    const now = w.clock.now().getTime();
    // The last attempt, at 14 days, is made whatever the circuit says.
    const last = now >= item.d.created_at.getTime() + retrySchedule.windowMs;
    if (hook.probeAt === null || last) {
      start(w, lane, item, hook, false);
    } else if (now < hook.probeAt) {
      // Open: this delivery and every other one waiting for the subscription wait in the database.
      lane.queue.finish(item);
      defer(w, lane, item);
      for (const other of lane.queue.removeDestination(item)) defer(w, lane, other);
    } else {
      // Its wait is over: this delivery is the probe, if no other instance has taken it.
      hook.probing = true;
      w.track(probe(w, lane, item, hook));
    }
  }
}

/** Takes the circuit's probe for this delivery, across every instance; without it, the delivery waits. */
async function probe(w: Dispatch, lane: Lane, item: Item, hook: Hook): Promise<void> {
  const now = w.clock.now();
  const until = new Date(now.getTime() + w.attemptMs + LEASE_MARGIN_MS);
  let taken: { won: boolean; probe_at: Date | null } | undefined;
  try {
    taken = await repo.claimProbe(w.fork(), item.destinationId, now, until);
  } catch (err) {
    w.logger.warn("could not take a webhook circuit's probe", { err, webhookId: item.destinationId });
  }
  w.view.learned(hook);
  if (taken?.won) {
    hook.probeAt = until.getTime();
    start(w, lane, item, hook, true);
    return;
  }
  hook.probing = false;
  lane.queue.finish(item);
  if (w.stopped) {
    release(lane, item);
  } else if (taken && taken.probe_at === null) {
    // Closed meanwhile (another instance's attempt succeeded): in line again.
    hook.probeAt = null;
    hook.streak = 0;
    lane.queue.push(item);
  } else {
    hook.probeAt = taken?.probe_at?.getTime() ?? hook.probeAt ?? now.getTime() + CIRCUIT_MIN_WAIT_MS;
    defer(w, lane, item);
  }
  pump(w, lane);
}

function start(w: Dispatch, lane: Lane, item: Item, hook: Hook, isProbe: boolean): void {
  if (w.stopped) {
    if (isProbe) hook.probing = false;
    lane.queue.finish(item);
    release(lane, item);
    return;
  }
  hook.running.set(item.d.id, Date.now());
  const attempt = () => run(w, lane, item, hook, isProbe);
  w.track(
    tracingOn
      ? // Its own event's trace, or a trace of its own: never the one current here (another partner's attempt).
        inSpan(
          "webhook.attempt",
          { "partner_api.delivery_id": item.d.id },
          attempt,
          item.trace ?? ROOT_CONTEXT,
        )
      : attempt(),
  );
}

/** Signs and sends one attempt; never throws (a secret this process cannot open is logged). */
async function send(w: Dispatch, d: Claimed, at: Date): Promise<AttemptResult | undefined> {
  try {
    const list = [w.openSecret(d.webhook_id, d.secret_enc)];
    if (d.previous_secret_enc && d.previous_secret_expires_at && d.previous_secret_expires_at > at) {
      list.push(w.openSecret(d.webhook_id, d.previous_secret_enc));
    }
    const headers = signatureHeaders({
      eventId: d.event_id,
      deliveryId: d.id,
      body: d.body,
      secrets: list,
      timestamp: Math.floor(at.getTime() / 1000),
    });
    return { ...(await w.sender.post(d.url, d.body, headers, d.environment)), sentHeaders: headers };
  } catch (err) {
    w.logger.error("could not sign a webhook delivery", { err, deliveryId: d.id });
    return undefined;
  }
}

/** One attempt: its slot freed as soon as it ends, then recorded. */
async function run(w: Dispatch, lane: Lane, item: Item, hook: Hook, isProbe: boolean): Promise<void> {
  const startedAt = w.clock.now();
  const result = await send(w, item.d, startedAt);
  hook.running.delete(item.d.id);
  if (isProbe) hook.probing = false;
  lane.queue.finish(item);
  if (!result) {
    // Not the endpoint's doing, and nothing was sent: tried again in a minute.
    lane.write({
      kind: "park",
      item,
      at: new Date(w.clock.now().getTime() + ms.minute),
      reason: "capacity",
    });
  } else {
    const now = w.clock.now();
    const closes = w.view.afterAttempt(hook, {
      ok: result.ok,
      probe: isProbe,
      latencyMs: result.latencyMs,
      now: now.getTime(),
    });
    lane.write({ kind: "attempt", item, result, startedAt, endedAt: now, closes });
  }
  // The slot is free now, not when the attempt is recorded.
  pump(w, lane);
}

/**
 * Claims the due deliveries among `ids` that no other worker holds (the others are left alone) and puts them
 * in line; resolves once they are claimed, or, with `wait`, once each is recorded or parked.
 */
export async function admit(
  w: Dispatch,
  em: Em,
  ids: string[],
  wait = false,
  traces?: ReadonlyMap<string, Context | undefined>,
): Promise<number> {
  if (w.stopped) throw new Error("the webhook delivery worker is stopping");
  w.tidy ??= setInterval(
    detached(() => expire(w)),
    250,
  ).unref();
  const now = w.clock.now();
  const asOf = w.view.mark();
  const claimed = await repo.claimDeliveries(em, ids, now, w.leaseMs);
  const live = claimed.filter((d) => d.webhook_status === "ACTIVE" && !d.deleted_at);
  if (live.length < claimed.length) {
    // Deleted or disabled meanwhile: their deliveries end here, unsent.
    const gone = new Set(claimed.filter((d) => !live.includes(d)).map((d) => d.webhook_id));
    await webhookRepository.giveUpDeliveries(em, [...gone], now);
  }
  const settled: Promise<void>[] = [];
  const touched = new Set<Lane>();
  for (const d of live) {
    const lane = w.lanes[d.environment];
    const hook = w.view.of(d.webhook_id);
    w.view.fromClaim(hook, d, asOf);
    let settle: (() => void) | undefined;
    if (wait) settled.push(new Promise<void>((resolve) => (settle = resolve)));
    const item: Item = {
      partnerId: d.partner,
      destinationId: d.webhook_id,
      d,
      startBy: Date.now() + w.holdMs,
      settle,
      trace: traces?.get(d.id),
    };
    touched.add(lane);
    // A line that will not move in time waits in the database, holding no claim; so does a full lane.
    const ahead = lane.queue.waitingFor(item) + lane.queue.inFlightTo(item);
    const waitMs = Math.floor(ahead / w.limits.maxInFlightPerDestination) * w.view.latencyOf(hook);
    if (lane.queue.waiting >= w.maxHeld || waitMs > w.holdMs) defer(w, lane, item, waitMs);
    else lane.queue.push(item);
  }
  for (const lane of touched) pump(w, lane);
  if (wait) await Promise.all(settled);
  return live.length;
}
