import type { CircuitState } from "./delivery-worker.repository.ts";

/** The shortest wait of an open circuit; it then doubles (the time it has been open) up to the policy's longest. */
export const CIRCUIT_MIN_WAIT_MS = 5_000;

/** What one worker process knows of a subscription: its circuit, and how long its endpoint takes. */
export interface Hook {
  streak: number;
  /** App-clock ms when the next probe may go; null while the circuit is closed. */
  probeAt: number | null;
  /** A probe of this process is under way (claimed, or in flight). */
  probing: boolean;
  /** Attempts ended and not yet recorded: until they are, this process's view of the circuit wins. */
  unrecorded: number;
  /** The view's change counter when this process last learned of the circuit. */
  learned: number;
  /** Moving average of attempt latency, 0 until one ended. */
  latencyMs: number;
  /** `Date.now()` at the start of each attempt in flight, by delivery id. */
  running: Map<string, number>;
  /** App-clock ms: deliveries parked for want of capacity are spread from here on. */
  parkCursor: number;
}

/** A process's view of the subscriptions it delivers to; see {@link createCircuitView}. */
export type CircuitView = ReturnType<typeof createCircuitView>;

/**
 * This process's view of each subscription's circuit (the truth is on the subscription's row, written when
 * attempts are recorded). A claim's row says how a circuit stood when the claim ran; it replaces the view only
 * when nothing was learned since (an attempt, a probe, a recorded outcome), so a claim that raced a probe never
 * reopens a circuit the probe just closed. Bounded: idle, closed subscriptions are forgotten past 20,000.
 */
export function createCircuitView(threshold: number) {
  const hooks = new Map<string, Hook>();
  let changes = 0;

  return {
    /** The view of one subscription. */
    of(id: string): Hook {
      let hook = hooks.get(id);
      if (hook) return hook;
      if (hooks.size >= 20_000) {
        for (const [key, h] of hooks) {
          if (h.running.size === 0 && h.unrecorded === 0 && !h.probing && h.probeAt === null)
            hooks.delete(key);
        }
      }
      hook = {
        streak: 0,
        probeAt: null,
        probing: false,
        unrecorded: 0,
        learned: 0,
        latencyMs: 0,
        running: new Map(),
        parkCursor: 0,
      };
      hooks.set(id, hook);
      return hook;
    },

    /** True while a probe of this process is under way for the subscription (its deliveries wait for it). */
    probing: (id: string): boolean => hooks.get(id)?.probing === true,

    /** A mark to take before a claim query, for {@link fromClaim}. */
    mark: (): number => ++changes,

    /** What a claim's row says, unless this process learned something since `asOf`. */
    fromClaim(hook: Hook, row: { failure_streak: number; circuit_probe_at: Date | null }, asOf: number) {
      if (hook.unrecorded > 0 || hook.probing || hook.learned >= asOf) return;
      hook.streak = row.failure_streak;
      hook.probeAt = row.circuit_probe_at?.getTime() ?? null;
      hook.learned = asOf;
    },

    /** The outcome of taking a probe (or not). */
    learned(hook: Hook) {
      hook.learned = ++changes;
    },

    /**
     * An attempt ended: the circuit as this process sees it until the attempt is recorded. Answers whether it
     * closes an open circuit.
     */
    afterAttempt(hook: Hook, a: { ok: boolean; probe: boolean; latencyMs: number; now: number }): boolean {
      hook.latencyMs = hook.latencyMs === 0 ? a.latencyMs : 0.8 * hook.latencyMs + 0.2 * a.latencyMs;
      const closes = a.ok && hook.probeAt !== null;
      if (a.ok) {
        hook.streak = 0;
        hook.probeAt = null;
      } else {
        hook.streak++;
        if (hook.streak >= threshold && (a.probe || hook.probeAt === null)) {
          hook.probeAt = a.now + CIRCUIT_MIN_WAIT_MS;
        }
      }
      hook.unrecorded++;
      hook.learned = ++changes;
      return closes;
    },

    /**
     * `count` attempts were recorded (or given up): the database's circuit wins once nothing this process did
     * is left unrecorded. `state` undefined: the row had nothing to change (closed, no failures).
     */
    afterRecord(hook: Hook, count: number, state: CircuitState | undefined, recorded: boolean) {
      hook.unrecorded -= count;
      if (!recorded || hook.unrecorded > 0 || hook.probing) return;
      hook.streak = state?.failure_streak ?? 0;
      hook.probeAt = state?.circuit_probe_at?.getTime() ?? null;
      hook.learned = ++changes;
    },

    /** What an attempt to this subscription takes now: the average, or longer if one in flight already has. */
    latencyOf(hook: Hook): number {
      let oldest = Number.POSITIVE_INFINITY;
      for (const t of hook.running.values()) oldest = Math.min(oldest, t);
      return Math.max(hook.latencyMs, oldest === Number.POSITIVE_INFINITY ? 0 : Date.now() - oldest, 1);
    },
  };
}
