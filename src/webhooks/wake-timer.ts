import TinyQueue from "tinyqueue";
import { detached } from "../platform/telemetry.ts";

/** Options for {@link createWakeTimer}. */
export interface WakeTimerOptions<T> {
  /** Called with everything whose time has come, as soon as it has (errors are the caller's to catch). */
  wake: (due: T[]) => void;
  /** At most this many wake-ups are kept; past it new ones are not (their queued jobs still come). */
  capacity: number;
  /** Wake-ups further ahead than this are not kept (their queued jobs come on time). */
  horizonMs: number;
  now?: () => number;
}

/** In-process wake-ups at given times: one timer, for the earliest. */
export interface WakeTimer<T> {
  /** Wakes `value` in `delayMs` (0 or less: on the next turn). */
  add(value: T, delayMs: number): void;
  /** Wake-ups kept. */
  readonly size: number;
  /** Drops every wake-up and the timer. */
  clear(): void;
}

/**
 * A bounded priority queue of wake-up times with one `setTimeout` for the earliest (unref'd: it never keeps the
 * process alive). It makes scheduled webhook attempts start on time: pg-boss gives a delayed job no NOTIFY, so
 * without it a retry waits for the queue's next poll.
 */
export function createWakeTimer<T>(o: WakeTimerOptions<T>): WakeTimer<T> {
  const now = o.now ?? (() => Date.now());
  const heap = new TinyQueue<{ at: number; value: T }>([], (a, b) => a.at - b.at);
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Number.POSITIVE_INFINITY;

  const fire = () => {
    timer = undefined;
    timerAt = Number.POSITIVE_INFINITY;
    const due: T[] = [];
    const t = now();
    for (let top = heap.peek(); top && top.at <= t + 1; top = heap.peek()) {
      heap.pop();
      due.push(top.value);
    }
    arm();
    if (due.length > 0) o.wake(due);
  };
  const arm = () => {
    const top = heap.peek();
    if (!top) return;
    if (timer && timerAt <= top.at) return;
    if (timer) clearTimeout(timer);
    timerAt = top.at;
    timer = setTimeout(detached(fire), Math.max(0, top.at - now()));
    timer.unref();
  };

  return {
    add(value, delayMs) {
      if (delayMs > o.horizonMs || heap.length >= o.capacity) return;
      heap.push({ at: now() + Math.max(0, delayMs), value });
      arm();
    },
    get size() {
      return heap.length;
    },
    clear() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      timerAt = Number.POSITIVE_INFINITY;
      heap.data.length = 0;
      heap.length = 0;
    },
  };
}
