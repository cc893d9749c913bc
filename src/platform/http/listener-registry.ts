import { randomUUID } from "node:crypto";
import { ms } from "../clock.ts";
import { type ChangeFeed, notifySql } from "../db/change-feed.ts";
import type { Orm } from "../db/orm.ts";
import { sql } from "../db/sql.ts";

/** How often a running instance says its ports are still its own, and how long a silent row counts. */
const REFRESH_MS = 10 * ms.minute;
const LIVE_MS = ms.hour;

/** What {@link startListenerRegistry} returns. */
export interface ListenerRegistry {
  /** Every port some live instance on this database listens on (its own included). */
  ports(): Promise<ReadonlySet<number>>;
  /** Forgets this instance's ports (a clean stop). */
  stop(): Promise<void>;
}

/**
 * Records this instance's listening ports in the database it shares with its siblings, so that a loopback
 * webhook (ALLOW_LOCAL_WEBHOOKS, for a developer's laptop and the tests) reaches no listener of any instance:
 * on one host, a sandbox subscription could otherwise point at a sibling's internal API and read its answers
 * back through the delivery attempts. The ports are read once and kept while the change feed vouches for them:
an instance announces its start and stop there. Rows are refreshed every 10 minutes; those of an instance that stopped
 * without saying so count for an hour, then are forgotten.
 */
export async function startListenerRegistry(
  orm: Orm,
  changes: ChangeFeed,
  ports: readonly number[],
): Promise<ListenerRegistry> {
  const instanceId = randomUUID();
  const em = () => orm.em.fork();
  const own = [...new Set(ports.filter((port) => port > 0))];
  const announce = async () => {
    const notify = notifySql("listeners", instanceId);
    await em().getConnection().execute(notify.sql, notify.params);
  };
  const refresh = async () => {
    await sql(em(), "delete from instance_listeners where seen_at < now() - make_interval(secs => $1)", [
      LIVE_MS / 1000,
    ]);
    await sql(
      em(),
      `insert into instance_listeners (instance_id, port, seen_at) select $1, unnest($2::int[]), now()
       on conflict (instance_id, port) do update set seen_at = excluded.seen_at`,
      [instanceId, own],
    );
  };
  await refresh();
  await announce();
  const timer = setInterval(() => void refresh().catch(() => undefined), REFRESH_MS);
  timer.unref();
  // Every loopback delivery attempt asks (the tests' and benchmarks' receivers): read once, kept until a change.
  let known: Promise<ReadonlySet<number>> | undefined;
  changes.subscribe("listeners", () => {
    known = undefined;
  });
  const read = async () => {
    const rows = await sql<{ port: number }>(
      em(),
      "select distinct port from instance_listeners where seen_at >= now() - make_interval(secs => $1)",
      [LIVE_MS / 1000],
    );
    return new Set(rows.map((r) => r.port));
  };
  return {
    ports() {
      if (known && changes.healthy) return known;
      const ports = read();
      known = ports;
      // A failed read is not remembered.
      ports.catch(() => {
        if (known === ports) known = undefined;
      });
      return ports;
    },
    async stop() {
      clearInterval(timer);
      await sql(em(), "delete from instance_listeners where instance_id = $1", [instanceId]);
      await announce();
    },
  };
}
