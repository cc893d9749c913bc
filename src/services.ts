import { createApiKeyService } from "./apikeys/api-key.service.ts";
import { createBooksService } from "./books/books.service.ts";
import type { Config } from "./config.ts";
import { consentFlow } from "./consent/consent.page.ts";
import { createConsentService } from "./consent/consent.service.ts";
import { type ConsentLinkService, createConsentLinkService } from "./consent/consent-link.service.ts";
import { consentLinksPurge } from "./consent/consent-retention.repository.ts";
import { createDisbursementService } from "./disbursements/disbursement.service.ts";
import {
  sandboxDisbursementsPurge,
  sandboxSimulatorOrphansPurge,
} from "./disbursements/disbursement-retention.repository.ts";
import { mandateFlow } from "./disbursements/mandate.page.ts";
import { createMandateService, type MandateService } from "./disbursements/mandate.service.ts";
import { createPaystackProvider } from "./disbursements/paystack.ts";
import { sandboxProvider } from "./disbursements/provider.ts";
import { createProviderWebhooks } from "./disbursements/provider-webhooks.ts";
import { createRefundService } from "./disbursements/refund.service.ts";
import { createRepaymentService } from "./disbursements/repayment.service.ts";
import type { EdgeServices } from "./edge/dependencies.ts";
import { createIdempotencyService } from "./idempotency/idempotency.service.ts";
import { createLedgerService } from "./ledger/ledger.service.ts";
import { sandboxLedgerLinesPurge } from "./ledger/ledger-retention.repository.ts";
import { createPartnerService } from "./partners/partner.service.ts";
import { createHostedPages, type HostedPages } from "./person/hosted-page.ts";
import { createPersonService, type PersonService } from "./person/person.service.ts";
import { createSmsSender } from "./person/sms.ts";
import type { Clock } from "./platform/clock.ts";
import type { DataKeys } from "./platform/crypto/data-keys.ts";
import type { SecretBox } from "./platform/crypto/secret-box.ts";
import type { ChangeFeed } from "./platform/db/change-feed.ts";
import type { Em, Orm } from "./platform/db/orm.ts";
import type { Jobs } from "./platform/jobs/jobs.ts";
import type { Logger } from "./platform/logger.ts";
import { createMetrics } from "./platform/metrics.ts";
import { registerDatabaseGauges } from "./platform/metrics-gauges.ts";
import { createPortal } from "./portal/portal.ts";
import { portalPurges } from "./portal/portal-retention.repository.ts";
import { ADDRESS_LIMITS, createAddressGuard } from "./ratelimit/address-guard.ts";
import { createConcurrencyLimiter } from "./ratelimit/concurrency-limiter.ts";
import { createLimitsService } from "./ratelimit/limits.service.ts";
import { rateLimitBucketsPurge } from "./ratelimit/rate-limit-retention.repository.ts";
import { createRateLimiter } from "./ratelimit/rate-limiter.ts";
import { createRetentionService } from "./retention/retention.service.ts";
import { createSandboxFixtures } from "./sandbox/fixtures.ts";
import { createSandboxService } from "./sandbox/sandbox.service.ts";
import { createSigningKeyService } from "./signing/signing-key.service.ts";
import { createSnapshotService } from "./snapshot/snapshot.service.ts";
import { createStandingService } from "./standing/standing.service.ts";
import { createPaymentInstrumentStore } from "./users/payment-instruments.ts";
import { createUserService } from "./users/user.service.ts";
import { createDeliveriesService } from "./webhooks/deliveries.service.ts";
import { createDeliveryWorker } from "./webhooks/delivery.worker.ts";
import type { DestinationPolicy, Resolver } from "./webhooks/destination.ts";
import { createDnsResolver } from "./webhooks/dns.ts";
import { createOutbox } from "./webhooks/outbox.service.ts";
import { createSender } from "./webhooks/sender.ts";
import { createWebhookService } from "./webhooks/webhook.service.ts";
import { webhookPurges } from "./webhooks/webhook-retention.repository.ts";

/** What every service is built from. */
export interface ServiceDeps {
  config: Readonly<Config>;
  /** For the metrics gauges only, which read the database once per scrape; services are given an `em`. */
  orm: Orm;
  clock: Clock;
  changes: ChangeFeed;
  box: SecretBox;
  jobs: Jobs;
  logger: Logger;
  /** DNS for webhook destinations; tests replace it to play DNS. */
  resolver?: Resolver;
  /** Tests only: local webhook destinations for production subscriptions too (see `DestinationPolicy`). */
  productionLocalWebhooks?: boolean;
  /** Keys for keyed hashes and CSRF tokens, kept sealed in the database. */
  dataKeys: DataKeys;
  /** Base URL of pages people open (consent links): PUBLIC_URL, or the partner listener once bound. */
  publicUrl: () => string;
}

/** The typed registry of services: built once per process, shared by handlers and workers. */
export type Services = ReturnType<typeof createServices>;

/** Builds every service. Nothing here listens or polls: that is the app's job, per role. */
export function createServices(deps: ServiceDeps) {
  const { config, orm, clock, changes, box, jobs, logger } = deps;
  const destinations: DestinationPolicy & { ownPorts: Set<number> } = {
    allowLocal: config.allowLocalWebhooks,
    allowLocalInProduction: deps.productionLocalWebhooks === true,
    resolver:
      deps.resolver ??
      createDnsResolver({ servers: config.webhooks.dnsServers, timeoutMs: config.webhooks.dnsTimeoutMs }),
    // Never a webhook destination: the configured ports now (a worker's deliveries may start before, or
    // without, the listeners), the bound ones added by the app once its listeners are up.
    ownPorts: new Set([config.port, config.internalPort].filter((port) => port > 0)),
  };
  const outbox = createOutbox({ jobs, clock });
  const sender = createSender({
    policy: destinations,
    connectTimeoutMs: config.webhooks.connectTimeoutMs,
    timeoutMs: config.webhooks.timeoutMs,
    // Both environments' attempts in flight: the worker's limits bound the sockets, not the agent's queue.
    maxSockets: 2 * config.webhooks.maxInFlight,
  });
  const users = createUserService({ clock, box, phoneKey: deps.dataKeys["phone-hash"] });
  const partners = createPartnerService({ clock });
  const apiKeys = createApiKeyService({ clock, changes, partners });
  // Each key's limits: its own override, its partner's, else these (CONTRACT.md §8, docs/rate-limits.md).
  const limits = createLimitsService({
    defaults: {
      ...config.rateLimits,
      snapshotConcurrency: config.expensiveLimits.snapshotConcurrencyPerKey,
      disbursementsPerUserPerDay: config.expensiveLimits.disbursementsPerUserPerDay,
    },
    clock,
    changes,
    partners,
    apiKeys,
  });
  const consents = createConsentService({ clock, box, outbox, users, partners });
  const person = createPersonService({
    clock,
    codeKey: deps.dataKeys["person-code"],
    users,
    sms: config.smsProvider ? createSmsSender(config.smsProvider) : undefined,
    logger,
  });
  const consentLinks = createConsentLinkService({
    clock,
    box,
    person,
    users,
    consents,
    partners,
    publicUrl: deps.publicUrl,
    allowLocalRedirects: config.allowLocalWebhooks,
  });
  const signingKeys = createSigningKeyService({ clock, box, changes });
  const ledger = createLedgerService({
    clock,
    users,
    counterpartyKey: deps.dataKeys["counterparty-hash"],
  });
  const metrics = createMetrics();
  registerDatabaseGauges(metrics, orm, clock);
  const instruments = createPaymentInstrumentStore({ box, now: () => clock.now() });
  // Production pays through the HTTP provider when it is configured; sandbox always through the simulator.
  const paystack = config.paymentProvider
    ? createPaystackProvider({ config: config.paymentProvider, instruments, logger })
    : undefined;
  const books = createBooksService({ box });
  const idempotency = createIdempotencyService({ clock, box });
  const mandates = createMandateService({
    clock,
    box,
    users,
    partners,
    person,
    jobs,
    publicUrl: deps.publicUrl,
  });
  const disbursements = createDisbursementService({
    clock,
    consents,
    partners,
    books,
    mandates,
    jobs,
    outbox,
    providers: paystack ? { sandbox: sandboxProvider, production: paystack } : { sandbox: sandboxProvider },
    instruments,
    logger,
    metrics,
    leaseMs: config.payoutResumeAfterMs,
    perUserPerDay: config.expensiveLimits.disbursementsPerUserPerDay,
  });
  const standing = createStandingService({ clock, outbox, users, consents });
  const refunds = createRefundService({
    clock,
    jobs,
    books,
    ledger,
    disbursements,
    logger,
    leaseMs: config.payoutResumeAfterMs,
  });
  const repayments = createRepaymentService({
    clock,
    outbox,
    books,
    ledger,
    disbursements,
    refunds,
    metrics,
  });
  const portal = createPortal({
    clock,
    box,
    partners,
    logger,
    publicUrl: deps.publicUrl,
    publicUrlFixed: config.publicUrl !== undefined,
    signinLimits: config.portalSignin,
  });
  return {
    books,
    ledger,
    instruments,
    standing,
    snapshots: createSnapshotService({ clock, signingKeys }),
    /** Snapshot reads in flight per API key, on this instance (each key's limit comes from `limits`). */
    snapshotReads: createConcurrencyLimiter(config.expensiveLimits.snapshotConcurrencyPerKey),
    disbursements,
    repayments,
    refunds,
    sandbox: createSandboxService({
      clock,
      users,
      consents,
      consentLinks,
      standing,
      disbursements,
      mandates,
      repayments,
      ledger,
      idempotency,
    }),
    fixtures: createSandboxFixtures({
      now: () => clock.now(),
      users,
      partners,
      disbursements,
      ledger,
      standing,
      logger,
    }),
    providerWebhooks: createProviderWebhooks({ paystack, disbursements, repayments, refunds, logger }),
    users,
    person,
    consents,
    consentLinks,
    mandates,
    hostedPages: hostedPages({
      pages: createHostedPages({ csrfKey: deps.dataKeys["consent-csrf"], logger }),
      person,
      consentLinks,
      mandates,
    }),
    partners,
    apiKeys,
    /** Dedicated capacity: the operator's per-partner and per-key limits. */
    limits,
    signingKeys,
    /** The partner portal's people, sessions and audit log. */
    portal,
    rateLimiter: createRateLimiter(),
    addressGuard: createAddressGuard(ADDRESS_LIMITS),
    idempotency,
    outbox,
    sender,
    /** Where webhooks may go; the app adds its listeners' ports once bound. */
    destinations,
    webhooks: createWebhookService({
      clock,
      box,
      outbox,
      destinations,
      sendLimit: config.webhooks.sendRateLimit,
      metrics,
    }),
    deliveries: createDeliveriesService({ clock }),
    metrics,
    retention: createRetentionService({
      clock,
      retention: config.retention,
      metrics,
      logger,
      // Deleted webhooks before events (an event left without deliveries goes in the same run).
      steps: [
        ...webhookPurges,
        consentLinksPurge,
        sandboxDisbursementsPurge(books),
        sandboxSimulatorOrphansPurge,
        sandboxLedgerLinesPurge,
        ...portalPurges,
        rateLimitBucketsPurge(portal.signin.buckets),
      ],
    }),
    deliveryWorker: createDeliveryWorker({
      clock,
      box,
      sender,
      outbox,
      logger,
      fork: () => orm.em.fork(),
      limits: config.webhooks,
      circuit: { threshold: config.webhooks.circuitFailures, maxWaitMs: config.webhooks.circuitMaxWaitMs },
      onAttempt: (a) => {
        metrics.webhookAttempts.inc({ outcome: a.outcome });
        metrics.webhookLatency.observe({ outcome: a.outcome }, a.latencyMs / 1000);
        if (a.firstAttempt) metrics.webhookFirstAttemptDelay.observe({}, a.sinceCreatedMs / 1000);
        if (a.lateMs !== undefined) metrics.webhookAttemptLateness.observe({}, Math.max(0, a.lateMs) / 1000);
      },
      onDeferred: (reason, count) => metrics.webhookDeferred.inc({ reason }, count),
      // Resolving and connecting, then the request: a claim outlives it, so a live worker never loses one.
      attemptMs: config.webhooks.connectTimeoutMs + config.webhooks.timeoutMs,
      holdMs: Math.min(5_000, config.webhooks.timeoutMs),
      sweepGraceMs: 5_000,
    }),
  };
}

/** The hosted pages people open: a consent link, a mandate, and a prompt session that leads to either. */
function hostedPages(o: {
  pages: HostedPages;
  person: PersonService;
  consentLinks: ConsentLinkService;
  mandates: MandateService;
}): EdgeServices["hostedPages"] {
  const { pages, person, consentLinks, mandates } = o;
  const consent = consentFlow(consentLinks);
  const mandate = mandateFlow(mandates);
  /** Opens a prompt session's URL (once): the session, and the hosted page it leads to. */
  const openPrompt = async (em: Em, token: string) => {
    const session = await person.openSession(em, token);
    const page: "consent" | "mandate" = session.subject.startsWith("dsb_") ? "mandate" : "consent";
    const pageToken =
      page === "mandate"
        ? await mandates.pageToken(em, session.subject)
        : await consentLinks.pageToken(em, session.subject);
    return { sessionId: session.id, page, token: pageToken };
  };
  return {
    consent: (em, req, res, requestId) => pages.handle(consent, em, req, res, requestId),
    mandate: (em, req, res, requestId) => pages.handle(mandate, em, req, res, requestId),
    prompt: (em, req, res, requestId) => pages.prompt(em, req, res, requestId, openPrompt),
  };
}
