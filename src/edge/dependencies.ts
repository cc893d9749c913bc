import type { ApiKeyService } from "../apikeys/api-key.service.ts";
import type { ConsentService } from "../consent/consent.service.ts";
import type { ConsentLinkService } from "../consent/consent-link.service.ts";
import type { BooksService } from "../disbursements/books.service.ts";
import type { DisbursementService } from "../disbursements/disbursement.service.ts";
import type { MandateService } from "../disbursements/mandate.service.ts";
import type { ProviderWebhooks } from "../disbursements/provider-webhooks.ts";
import type { RepaymentService } from "../disbursements/repayment.service.ts";
import type { IdempotencyService } from "../idempotency/idempotency.service.ts";
import type { LedgerService } from "../ledger/ledger.service.ts";
import type { LimitsService } from "../limits/limits.service.ts";
import type { PartnerService } from "../partners/partner.service.ts";
import type { Em } from "../platform/db/orm.ts";
import type { ListenOptions } from "../platform/http/listener.ts";
import type { AnyResponse } from "../platform/http/rest-errors.ts";
import type { AnyRequest } from "../platform/http/transcoder.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Portal } from "../portal/portal.ts";
import type { AddressGuard, ConcurrencyLimiter, RateLimiter } from "../ratelimit/limiters.service.ts";
import type { RequestLogService } from "../requestlog/request-log.service.ts";
import type { SandboxFixtures } from "../sandbox/fixtures.ts";
import type { SandboxService } from "../sandbox/sandbox.service.ts";
import type { SigningKeyService } from "../signing/signing-key.service.ts";
import type { SnapshotService } from "../snapshot/snapshot.service.ts";
import type { StandingService } from "../standing/standing.service.ts";
import type { PaymentInstrumentStore, UserService } from "../users/user.service.ts";
import type { DeliveriesService } from "../webhooks/deliveries.service.ts";
import type { WebhookService } from "../webhooks/webhook.service.ts";
import type { PortalEdgeOptions } from "./portal-edge.ts";

// What the edge is given by the composition root (src/services.ts, src/config.ts): it imports neither, so
// the layers stay one way (docs/architecture.md).

/** A hosted page people open in a browser: it answers its own request, errors included. */
export type HostedPage = (em: Em, req: AnyRequest, res: AnyResponse, requestId: string) => Promise<void>;

/** The services the listeners serve and admit with. */
export interface EdgeServices {
  apiKeys: ApiKeyService;
  requestLog: RequestLogService;
  signingKeys: SigningKeyService;
  partners: PartnerService;
  limits: LimitsService;
  rateLimiter: RateLimiter;
  addressGuard: AddressGuard;
  idempotency: IdempotencyService;
  metrics: Metrics;
  webhooks: WebhookService;
  deliveries: DeliveriesService;
  snapshots: SnapshotService;
  /** Snapshot reads in flight per API key, on this instance. */
  snapshotReads: ConcurrencyLimiter;
  ledger: LedgerService;
  standing: StandingService;
  users: UserService;
  instruments: PaymentInstrumentStore;
  consents: ConsentService;
  consentLinks: ConsentLinkService;
  mandates: MandateService;
  disbursements: DisbursementService;
  repayments: RepaymentService;
  books: BooksService;
  providerWebhooks: ProviderWebhooks;
  sandbox: SandboxService;
  fixtures: SandboxFixtures;
  portal: Portal;
  /** The consent-link, mandate and prompt-session pages. */
  hostedPages: { consent: HostedPage; mandate: HostedPage; prompt: HostedPage };
}

/** The configuration the listeners take. */
export interface ListenerConfig {
  host: string;
  port: number;
  internalHost: string;
  internalPort: number;
  http: ListenOptions["timeouts"];
  connections: ListenOptions["connections"];
  /** Origins whose browsers may call the API (CORS). */
  corsOrigins: readonly string[];
  /** A portal member's own read and write buckets. */
  rateLimits: PortalEdgeOptions["buckets"];
}
