import type { Clock } from "../platform/clock.ts";
import type { Orm } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Metrics } from "../platform/metrics.ts";
import { environments } from "../platform/tenancy.ts";

/**
 * Whether the signing keys rotate on time (docs/operations.md "Signing-key rotation overdue"): how long the
 * key signing now has left, and whether its successor is published (the rotation job publishes it 30 days
 * ahead). Read from the database when scraped: every instance reports the same values.
 */
export function registerSigningGauges(metrics: Metrics, orm: Orm, clock: Clock): void {
  const keys = () =>
    sql<{ environment: string; active_left: number | null; incoming: number }>(
      orm.em.fork(),
      `select environment,
              extract(epoch from (max(retires_at) filter (where not_before <= $1 and retires_at > $1) - $1))::float8
                as active_left,
              count(*) filter (where not_before > $1)::int as incoming
         from signing_keys group by environment`,
      [clock.now()],
    );
  metrics.gauge(
    "signing_key_active_remaining_seconds",
    "How long the signing key that signs now has left before it stops, by environment (-1: no key signs).",
    async () => {
      const rows = new Map((await keys()).map((r) => [r.environment, r]));
      return environments.map((environment) => ({
        labels: { environment },
        value: rows.get(environment)?.active_left ?? -1,
      }));
    },
  );
  metrics.gauge(
    "signing_keys_incoming",
    "Signing keys published to sign later (the next quarter's), by environment.",
    async () => {
      const rows = new Map((await keys()).map((r) => [r.environment, r]));
      return environments.map((environment) => ({
        labels: { environment },
        value: rows.get(environment)?.incoming ?? 0,
      }));
    },
  );
}
