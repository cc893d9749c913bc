import type { App } from "../../src/app.ts";
import { notifySql } from "../../src/platform/db/change-feed.ts";

/**
 * Waits until `check` holds, re-checking as soon as the event loop is free; fails after `timeoutMs`. For
 * things that happen on another connection or process (a NOTIFY, a worker's write), never a fixed sleep.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 10_000, what = "condition" }: { timeoutMs?: number; what?: string } = {},
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until `app`'s change feed has delivered every NOTIFY committed before this call: PostgreSQL delivers
 * a session's notifications in commit order, so once a marker sent now arrives, the echoes of earlier changes
 * (keys a fixture issued, say) have arrived too and cannot clear a cache the test is about to watch.
 */
export async function settleChangeFeed(app: App): Promise<void> {
  const marker = `settle-${process.hrtime.bigint()}`;
  let heard = false;
  app.changes.subscribe("api_key", (id) => {
    if (id === marker) heard = true;
  });
  const { sql, params } = notifySql("api_key", marker);
  await app.orm.em.getConnection().execute(sql, params);
  await eventually(() => heard, { what: "the change feed's echo of a marker" });
}
