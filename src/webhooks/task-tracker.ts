import type { Logger } from "../platform/logger.ts";

/** The delivery worker's background tasks; see {@link createTaskTracker}. */
export type TaskTracker = ReturnType<typeof createTaskTracker>;

/**
 * Keeps every promise the delivery worker starts until it settles, so stopping can wait for them; a task that
 * fails is logged, never left unhandled.
 */
export function createTaskTracker(logger: Logger) {
  const tracked = new Set<Promise<void>>();
  return {
    track(p: Promise<unknown>): void {
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
    },

    /** Tasks not yet settled. */
    get size(): number {
      return tracked.size;
    },

    /** Waits until every task has settled (those started meanwhile too), or until `until` (`Date.now()` ms). */
    async settle(until: number): Promise<void> {
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
    },
  };
}
