/** The source of "now" for every rule that depends on time (key rotation, expiries, retries). */
export interface Clock {
  now(): Date;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => new Date() };

/** A clock that moves only when told to; used by tests and by operators' dry runs. */
export class ManualClock implements Clock {
  #ms: number;

  constructor(start: Date | string | number = Date.now()) {
    this.#ms = new Date(start).getTime();
  }

  now(): Date {
    return new Date(this.#ms);
  }

  /** Moves the clock to an absolute time. */
  set(to: Date | string | number): void {
    this.#ms = new Date(to).getTime();
  }

  /** Moves the clock forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.#ms += ms;
  }
}

/** Milliseconds in common units, so schedules read as data. */
export const ms = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
} as const;
