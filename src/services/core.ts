import { createApiKeyService } from "../apikeys/api-key.service.ts";
import { createIdempotencyService } from "../idempotency/idempotency.service.ts";
import { createLedgerService } from "../ledger/ledger.service.ts";
import { createLimitsService } from "../limits/limits.service.ts";
import { createPartnerService } from "../partners/partner.service.ts";
import { createMetrics } from "../platform/metrics.ts";
import { registerDatabaseGauges } from "../platform/metrics-gauges.ts";
import {
  ADDRESS_LIMITS,
  createAddressGuard,
  createConcurrencyLimiter,
  createRateLimiter,
} from "../ratelimit/limiters.service.ts";
import { createRequestLogService } from "../requestlog/request-log.service.ts";
import { registerSigningGauges } from "../signing/signing-gauges.ts";
import { createSigningKeyService } from "../signing/signing-key.service.ts";
import { createPaymentInstrumentStore } from "../users/payment-instruments.ts";
import { createUserService } from "../users/user.service.ts";
import type { ServiceDeps } from "./deps.ts";

/** Who is who and what they may do: people, partners, keys and their limits, signing keys, metrics. */
export function coreServices(deps: ServiceDeps) {
  const { config, orm, clock, changes, box } = deps;
  const users = createUserService({ clock, box, phoneKey: deps.dataKeys["phone-hash"] });
  const partners = createPartnerService({ clock });
  const apiKeys = createApiKeyService({ clock, changes, partners });
  const metrics = createMetrics();
  registerDatabaseGauges(metrics, orm, clock);
  registerSigningGauges(metrics, orm, clock);
  return {
    users,
    partners,
    apiKeys,
    /** The partners' request logs, read in the portal (written by the app's writer). */
    requestLog: createRequestLogService({ clock, apiKeys }),
    /**
     * Dedicated capacity: each key's limits are its own override, its partner's, else these (CONTRACT.md §8,
     * docs/rate-limits.md).
     */
    limits: createLimitsService({
      defaults: {
        ...config.rateLimits,
        snapshotConcurrency: config.expensiveLimits.snapshotConcurrencyPerKey,
        disbursementsPerUserPerDay: config.expensiveLimits.disbursementsPerUserPerDay,
      },
      clock,
      changes,
      partners,
      apiKeys,
    }),
    signingKeys: createSigningKeyService({ clock, box, changes }),
    ledger: createLedgerService({ clock, users, counterpartyKey: deps.dataKeys["counterparty-hash"] }),
    instruments: createPaymentInstrumentStore({ box, now: () => clock.now() }),
    idempotency: createIdempotencyService({ clock, box }),
    metrics,
    rateLimiter: createRateLimiter(),
    addressGuard: createAddressGuard(ADDRESS_LIMITS),
    /** Snapshot reads in flight per API key, on this instance (each key's limit comes from `limits`). */
    snapshotReads: createConcurrencyLimiter(config.expensiveLimits.snapshotConcurrencyPerKey),
  };
}

/** What {@link coreServices} builds. */
export type CoreServices = ReturnType<typeof coreServices>;
