import type { Clock } from "../platform/clock.ts";
import type { Orm } from "../platform/db/orm.ts";
import type { Metrics } from "../platform/metrics.ts";
import { readForScrape } from "../platform/metrics-gauges.ts";
import { type Environment, environments } from "../platform/tenancy.ts";
import { keyStatus } from "./schedule.ts";
import { signingKeyRepository as repo } from "./signing-key.repository.ts";

/** One environment's rotation at a time: how long the signing key has left (-1: none signs), and its successors. */
async function rotation(orm: Orm, environment: Environment, now: Date) {
  const keys = await readForScrape(orm, (em) => repo.list(em, environment));
  const active = keys.filter((k) => keyStatus(k, now) === "ACTIVE");
  const until = Math.max(...active.map((k) => k.retiresAt.getTime()));
  return {
    left: active.length ? (until - now.getTime()) / 1000 : -1,
    incoming: keys.filter((k) => keyStatus(k, now) === "INCOMING").length,
  };
}

/**
 * Whether the signing keys rotate on time (docs/operations.md "Signing-key rotation overdue"): how long the
 * key signing now has left, and whether its successor is published (the rotation job publishes it 30 days
 * ahead). Read from the database when scraped (a few rows): every instance reports the same values.
 */
export function registerSigningGauges(metrics: Metrics, orm: Orm, clock: Clock): void {
  // One environment after another: a scrape holds one pooled connection at a time.
  const all = async () => {
    const out: { e: Environment; left: number; incoming: number }[] = [];
    for (const e of environments) out.push({ e, ...(await rotation(orm, e, clock.now())) });
    return out;
  };
  metrics.gauge(
    "signing_key_active_remaining_seconds",
    "How long the signing key that signs now has left before it stops, by environment (-1: no key signs).",
    async () => (await all()).map((r) => ({ labels: { environment: r.e }, value: r.left })),
  );
  metrics.gauge(
    "signing_keys_incoming",
    "Signing keys published to sign later (the next quarter's), by environment.",
    async () => (await all()).map((r) => ({ labels: { environment: r.e }, value: r.incoming })),
  );
}
