import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import { type Environment, environments } from "../platform/tenancy.ts";
import { CIRCUIT_MIN_WAIT_MS, createCircuitView, type Hook } from "./circuit-view.ts";
import { type AttemptReport, createDeliveryWriter, type DeferReason, type Write } from "./delivery-writer.ts";
import { FairQueue } from "./fair-queue.ts";
import type { Outbox } from "./outbox.ts";
import { retrySchedule } from "./schedule.ts";
import type { AttemptResult, Sender } from "./sender.ts";
import { signatureHeaders } from "./signature.ts";
import { createWakeTimer } from "./wake-timer.ts";
import { type ClaimedDelivery as Claimed, webhookRepository as repo } from "./webhook.repository.ts";

export type { DeferReason };
export { CIRCUIT_MIN_WAIT_MS };

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

/** A claim outlives the hold and the longest attempt by this much, so a live worker never loses one. */
const LEASE_MARGIN_MS = 5 * ms.second;
/** The shortest wait of a delivery parked for want of capacity. */
const MIN_PARK_MS = ms.second;

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

/** A secret box AAD that binds a subscription's secret to it. */
export const secretAad = (webhookId: string) => `webhook-secret:${webhookId}`;

/** A claimed delivery waiting in this process, or in flight. */
interface Item {
  partnerId: string;
  /** The subscription: one destination URL. */
  destinationId: string;
  d: Claimed;
  /** `Date.now()` by which its attempt must start (its claim must outlast the attempt), else it is parked. */
  startBy: number;
  /** Ends {@link DeliveryWorker.processBatch}'s wait for it. */
  settle: (() => void) | undefined;
}

/** One environment's capacity, and the writer that records its attempts. */
interface Lane {
  queue: FairQueue<Item>;
  write: (w: Write<Item>) => void;
}

/** Sends due deliveries and records what happened; the delivery row is the truth, jobs only wake it. */
export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;

/**
 * Creates the delivery worker. Wake-ups (queued jobs, and an in-process timer for attempts this process
 * scheduled) claim deliveries; claimed deliveries wait for a slot in their environment's {@link FairQueue}
 * (limits per environment, partner and subscription, partners served in turn); each attempt is recorded as soon
 * as it ends, in a short transaction shared only with attempts that ended at the same moment; a subscription
 * whose attempts keep failing has its circuit opened, and its deliveries wait in the database while one probe at
 * a time goes.
 */
export function createDeliveryWorker(o: DeliveryWorkerOptions) {
  const { clock, box, sender, outbox, logger, limits } = o;
  const leaseMs = o.holdMs + o.attemptMs + LEASE_MARGIN_MS;
  /** Claimed deliveries one lane holds at most; past it, more are parked in the database. */
  const maxHeld = Math.max(1_000, 20 * limits.maxInFlight);
  const record = {
    clock,
    outbox,
    fork: o.fork,
    circuit: {
      threshold: o.circuit.threshold,
      minWaitMs: CIRCUIT_MIN_WAIT_MS,
      maxWaitMs: o.circuit.maxWaitMs,
    },
  };
  const view = createCircuitView(o.circuit.threshold);

  const secrets = new Map<string, { enc: Buffer; secret: string }>();
  const open = (webhookId: string, enc: Buffer): string => {
    const hit = secrets.get(`${webhookId}:${enc.toString("base64")}`);
    if (hit) return hit.secret;
    const secret = box.open(enc, secretAad(webhookId)).toString("utf8");
    if (secrets.size > 10_000) secrets.clear();
    secrets.set(`${webhookId}:${enc.toString("base64")}`, { enc, secret });
    return secret;
  };

  // Every promise the worker starts is tracked, so stop() can wait for them; none is left unhandled.
  const tracked = new Set<Promise<void>>();
  const track = (p: Promise<unknown>): void => {
    const settled: Promise<void> = p.then(
      () => {
        tracked.delete(settled);
      },
      (err: unknown) => {
        tracked.delete(settled);
        logger.error("webhook delivery task failed", { err });
      },
    );
    tracked.add(settled);
  };
  let stopped = false;

  // Attempts this process scheduled wake here on time; pg-boss gives delayed jobs no NOTIFY, so they would
  // otherwise wait for the queue's next poll. Their queued jobs stay as the fallback (another process, a restart).
  const wakeups = createWakeTimer<{ id: string; environment: Environment }>({
    capacity: 10_000,
    horizonMs: 15 * ms.minute,
    wake: (due) => {
      for (const environment of environments) {
        const ids = due.filter((w) => w.environment === environment).map((w) => w.id);
        if (ids.length === 0 || stopped) continue;
        track(
          admit(o.fork(), ids).catch((err: unknown) =>
            logger.warn("webhook wake-up failed; its queued job or the sweeper brings it", { err }),
          ),
        );
      }
    },
  });
  const wakeAt = (id: string, environment: Environment, at: Date, now: Date) => {
    if (!stopped) wakeups.add({ id, environment }, at.getTime() - now.getTime());
  };

  const newLane = (): Lane => ({
    queue: new FairQueue<Item>({
      total: limits.maxInFlight,
      perPartner: limits.maxInFlightPerPartner,
      perDestination: limits.maxInFlightPerDestination,
    }),
    write: createDeliveryWriter<Item>({
      ...record,
      logger,
      view,
      wakeAt,
      track,
      onAttempt: o.onAttempt,
      onDeferred: o.onDeferred,
    }).write,
  });
  const lanes: Record<Environment, Lane> = { sandbox: newLane(), production: newLane() };

  let tidy: NodeJS.Timeout | undefined;
  /** Parks what has waited here as long as its claim allows. */
  const expire = () => {
    const t = Date.now();
    for (const lane of Object.values(lanes)) {
      if (lane.queue.waiting === 0) continue;
      for (const item of lane.queue.remove((x) => x.startBy <= t)) defer(lane, item);
    }
  };

  /** Moves a claimed delivery to a later time in the database, letting go of it (its claim, its slot). */
  const defer = (lane: Lane, item: Item, waitMs = 0) => {
    const hook = view.of(item.destinationId);
    const now = clock.now().getTime();
    const deadline = item.d.created_at.getTime() + retrySchedule.windowMs;
    if (hook.probeAt !== null && now < deadline) {
      // Open circuit: until the next probe, spread over a second; never past the last attempt's time.
      const at = Math.min(Math.max(hook.probeAt, now) + Math.floor(Math.random() * ms.second), deadline);
      lane.write({ kind: "park", item, at: new Date(at), reason: "circuit" });
      return;
    }
    // No free slot in time: after the deliveries in front of it, as this endpoint answers now.
    const at = Math.max(now + Math.max(MIN_PARK_MS, waitMs), hook.parkCursor);
    hook.parkCursor = at + view.latencyOf(hook) / limits.maxInFlightPerDestination;
    lane.write({ kind: "park", item, at: new Date(at), reason: "capacity" });
  };
  /** Lets another worker take a claimed delivery now (this one is stopping). */
  const release = (lane: Lane, item: Item) =>
    lane.write({ kind: "park", item, at: item.d.next_attempt_at, reason: "release" });

  /** Starts what may start in a lane: partners in turn, within every limit. */
  const pump = (lane: Lane) => {
    if (stopped) return;
    for (let item = lane.queue.next(view.probing); item; item = lane.queue.next(view.probing)) {
      const hook = view.of(item.destinationId);
      const now = clock.now().getTime();
      // The last attempt, at 14 days, is made whatever the circuit says.
      const last = now >= item.d.created_at.getTime() + retrySchedule.windowMs;
      if (hook.probeAt === null || last) {
        start(lane, item, hook, false);
      } else if (now < hook.probeAt) {
        // Open: this delivery and every other one waiting for the subscription wait in the database.
        lane.queue.finish(item);
        defer(lane, item);
        for (const other of lane.queue.removeDestination(item)) defer(lane, other);
      } else {
        // Its wait is over: this delivery is the probe, if no other instance has taken it.
        hook.probing = true;
        track(probe(lane, item, hook));
      }
    }
  };

  const probe = async (lane: Lane, item: Item, hook: Hook) => {
    const now = clock.now();
    const until = new Date(now.getTime() + o.attemptMs + LEASE_MARGIN_MS);
    let taken: { won: boolean; probe_at: Date | null } | undefined;
    try {
      taken = await repo.claimProbe(o.fork(), item.destinationId, now, until);
    } catch (err) {
      logger.warn("could not take a webhook circuit's probe", { err, webhookId: item.destinationId });
    }
    view.learned(hook);
    if (taken?.won) {
      hook.probeAt = until.getTime();
      return start(lane, item, hook, true);
    }
    hook.probing = false;
    lane.queue.finish(item);
    if (stopped) {
      release(lane, item);
    } else if (taken && taken.probe_at === null) {
      // Closed meanwhile (another instance's attempt succeeded): in line again.
      hook.probeAt = null;
      hook.streak = 0;
      lane.queue.push(item);
    } else {
      hook.probeAt = taken?.probe_at?.getTime() ?? hook.probeAt ?? now.getTime() + CIRCUIT_MIN_WAIT_MS;
      defer(lane, item);
    }
    pump(lane);
  };

  const start = (lane: Lane, item: Item, hook: Hook, isProbe: boolean) => {
    if (stopped) {
      if (isProbe) hook.probing = false;
      lane.queue.finish(item);
      return release(lane, item);
    }
    hook.running.set(item.d.id, Date.now());
    track(run(lane, item, hook, isProbe));
  };

  /** Signs and sends one attempt; never throws (a secret this process cannot open is logged). */
  const send = async (d: Claimed, at: Date): Promise<AttemptResult | undefined> => {
    try {
      const list = [open(d.webhook_id, d.secret_enc)];
      if (d.previous_secret_enc && d.previous_secret_expires_at && d.previous_secret_expires_at > at) {
        list.push(open(d.webhook_id, d.previous_secret_enc));
      }
      const headers = signatureHeaders({
        eventId: d.event_id,
        deliveryId: d.id,
        body: d.body,
        secrets: list,
        timestamp: Math.floor(at.getTime() / 1000),
      });
      return { ...(await sender.post(d.url, d.body, headers, d.environment)), sentHeaders: headers };
    } catch (err) {
      logger.error("could not sign a webhook delivery", { err, deliveryId: d.id });
      return undefined;
    }
  };

  /** One attempt: its slot freed as soon as it ends, then recorded. */
  const run = async (lane: Lane, item: Item, hook: Hook, isProbe: boolean) => {
    const startedAt = clock.now();
    const result = await send(item.d, startedAt);
    hook.running.delete(item.d.id);
    if (isProbe) hook.probing = false;
    lane.queue.finish(item);
    if (!result) {
      // Not the endpoint's doing, and nothing was sent: tried again in a minute.
      lane.write({
        kind: "park",
        item,
        at: new Date(clock.now().getTime() + ms.minute),
        reason: "capacity",
      });
    } else {
      const now = clock.now();
      const closes = view.afterAttempt(hook, {
        ok: result.ok,
        probe: isProbe,
        latencyMs: result.latencyMs,
        now: now.getTime(),
      });
      lane.write({ kind: "attempt", item, result, startedAt, endedAt: now, closes });
    }
    // The slot is free now, not when the attempt is recorded.
    pump(lane);
  };

  /**
   * Claims the due deliveries among `ids` that no other worker holds (the others are left alone) and puts them
   * in line; resolves once they are claimed, or, with `wait`, once each is recorded or parked.
   */
  const admit = async (em: Em, ids: string[], wait = false): Promise<number> => {
    if (stopped) throw new Error("the webhook delivery worker is stopping");
    tidy ??= setInterval(expire, 250).unref();
    const now = clock.now();
    const asOf = view.mark();
    const claimed = await repo.claimDeliveries(em, ids, now, leaseMs);
    const live = claimed.filter((d) => d.webhook_status === "ACTIVE" && !d.deleted_at);
    if (live.length < claimed.length) {
      // Deleted or disabled meanwhile: their deliveries end here, unsent.
      const gone = new Set(claimed.filter((d) => !live.includes(d)).map((d) => d.webhook_id));
      await repo.giveUpDeliveries(em, [...gone], now);
    }
    const settled: Promise<void>[] = [];
    const touched = new Set<Lane>();
    for (const d of live) {
      const lane = lanes[d.environment];
      const hook = view.of(d.webhook_id);
      view.fromClaim(hook, d, asOf);
      let settle: (() => void) | undefined;
      if (wait) settled.push(new Promise<void>((resolve) => (settle = resolve)));
      const item: Item = {
        partnerId: d.partner,
        destinationId: d.webhook_id,
        d,
        startBy: Date.now() + o.holdMs,
        settle,
      };
      touched.add(lane);
      // A line that will not move in time waits in the database, holding no claim; so does a full lane.
      const ahead = lane.queue.waitingFor(item) + lane.queue.inFlightTo(item);
      const waitMs = Math.floor(ahead / limits.maxInFlightPerDestination) * view.latencyOf(hook);
      if (lane.queue.waiting >= maxHeld || waitMs > o.holdMs) defer(lane, item, waitMs);
      else lane.queue.push(item);
    }
    for (const lane of touched) pump(lane);
    if (wait) await Promise.all(settled);
    return live.length;
  };

  return {
    /** Claims and lines up due deliveries among `ids` (a batch of wake-ups); resolves once they are claimed. */
    admit: (em: Em, ids: string[]) => admit(em, ids),

    /**
     * Makes one attempt for each due delivery among `ids` (the others are left alone) and resolves once each is
     * recorded, or parked (its subscription's circuit open, or no slot in time). No transaction is open while
     * an endpoint is called: the claim commits first, the outcome is recorded after.
     */
    processBatch: (em: Em, ids: string[]) => admit(em, ids, true),

    /**
     * Re-queues deliveries that are overdue and held by no worker (their wake-up was lost, the worker holding
     * them died, or the workers are far behind). One sweeper runs at a time across all instances.
     */
    async sweep(em: Em, limit = 1_000): Promise<number> {
      return em.transactional(async (tx) => {
        if (!(await repo.tryLockSweeper(tx))) return 0;
        const due = await repo.overdueDeliveries(tx, clock.now(), o.sweepGraceMs, limit);
        await outbox.enqueue(tx, due);
        if (due.length > 0) {
          logger.info("re-queued overdue webhook deliveries", {
            count: due.length,
            production: due.filter((d) => d.environment === "production").length,
            sandbox: due.filter((d) => d.environment === "sandbox").length,
          });
        }
        return due.length;
      });
    },

    /** Attempts in flight and deliveries waiting for a slot in this process, per environment. */
    load(): Record<Environment, { inFlight: number; waiting: number }> {
      const of = (lane: Lane) => ({ inFlight: lane.queue.inFlight, waiting: lane.queue.waiting });
      return { sandbox: of(lanes.sandbox), production: of(lanes.production) };
    },

    /**
     * Stops: no more claims; deliveries waiting here are let go (re-queued now, for another worker); attempts in
     * flight end and are recorded, for up to `timeoutMs`. An attempt still running then is tried again by
     * another worker once its claim lapses.
     */
    async stop(timeoutMs = 10_000): Promise<void> {
      if (stopped) return;
      stopped = true;
      if (tidy) clearInterval(tidy);
      wakeups.clear();
      for (const lane of Object.values(lanes)) {
        for (const item of lane.queue.remove(() => true)) release(lane, item);
      }
      const until = Date.now() + timeoutMs;
      while (tracked.size > 0 && Date.now() < until) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.allSettled([...tracked]),
          new Promise((resolve) => {
            timer = setTimeout(resolve, until - Date.now());
          }),
        ]);
        clearTimeout(timer);
      }
      if (tracked.size > 0) {
        logger.warn(
          "stopped with webhook attempts still under way; they are tried again once their claims lapse",
          {
            count: tracked.size,
          },
        );
      }
    },
  };
}
