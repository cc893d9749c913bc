import type pg from "pg";

/** The connection pools this process has opened, by the name their sessions carry (`application_name`). */
const pools = new Map<pg.Pool, string>();

/** Counts `pool` in {@link poolStats} under `name` until it is ended. */
export function trackPool(pool: pg.Pool, name: string): void {
  pools.set(pool, name);
}

/** One name's pools now: connections running a unit of work, idle ones, and units of work waiting for one. */
export interface PoolStats {
  name: string;
  inUse: number;
  idle: number;
  waiting: number;
}

/** Every open pool's counts, summed by name (a name's pools are one's successive pools); ended pools are forgotten. */
export function poolStats(): PoolStats[] {
  const byName = new Map<string, PoolStats>();
  for (const [pool, name] of pools) {
    if (pool.ended) {
      pools.delete(pool);
      continue;
    }
    const s = byName.get(name) ?? { name, inUse: 0, idle: 0, waiting: 0 };
    s.inUse += pool.totalCount - pool.idleCount;
    s.idle += pool.idleCount;
    s.waiting += pool.waitingCount;
    byName.set(name, s);
  }
  return [...byName.values()];
}
