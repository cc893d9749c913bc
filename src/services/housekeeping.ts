import { consentLinksPurge } from "../consent/consent-retention.repository.ts";
import {
  sandboxDisbursementsPurge,
  sandboxSimulatorOrphansPurge,
} from "../disbursements/disbursement-retention.repository.ts";
import { sandboxLedgerLinesPurge } from "../ledger/ledger-retention.repository.ts";
import { portalPurges } from "../portal/portal-retention.repository.ts";
import { rateLimitBucketsPurge } from "../ratelimit/rate-limit-retention.repository.ts";
import { requestLogPurge } from "../requestlog/request-log-retention.repository.ts";
import { createRetentionService } from "../retention/retention.service.ts";
import { createSandboxFixtures } from "../sandbox/fixtures.ts";
import { createSandboxService } from "../sandbox/sandbox.service.ts";
import { webhookPurges } from "../webhooks/webhook-retention.repository.ts";
import type { CoreServices } from "./core.ts";
import type { ServiceDeps } from "./deps.ts";
import type { MoneyServices } from "./money.ts";
import type { PeopleServices } from "./people.ts";

/** The sandbox's fixture users and helpers. */
export function sandboxServices(
  deps: ServiceDeps,
  core: CoreServices,
  people: PeopleServices,
  money: MoneyServices,
) {
  const { clock, logger } = deps;
  const { users, partners, ledger, idempotency } = core;
  const { consents, consentLinks, standing } = people;
  const { disbursements, mandates, repayments } = money;
  return {
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
  };
}

/** The hourly purge, every feature's steps in order. */
export function retentionService(
  deps: ServiceDeps,
  core: CoreServices,
  people: PeopleServices,
  money: MoneyServices,
) {
  return createRetentionService({
    clock: deps.clock,
    retention: deps.config.retention,
    metrics: core.metrics,
    logger: deps.logger,
    // Deleted webhooks before events (an event left without deliveries goes in the same run).
    steps: [
      ...webhookPurges,
      consentLinksPurge,
      sandboxDisbursementsPurge(money.books),
      sandboxSimulatorOrphansPurge,
      sandboxLedgerLinesPurge,
      ...portalPurges,
      rateLimitBucketsPurge(people.portal.signin.buckets),
      requestLogPurge,
    ],
  });
}
