import { ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import { IngestService } from "../../gen/internal/v1/ingest_pb.ts";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { PortalAdminService } from "../../gen/internal/v1/portal_admin_pb.ts";
import { SandboxAdminService } from "../../gen/internal/v1/sandbox_admin_pb.ts";
import { SigningKeyService } from "../../gen/internal/v1/signing_keys_pb.ts";
import { ConsentAdminService, UserService } from "../../gen/internal/v1/users_pb.ts";
import { ApiKeyService as PartnerApiKeyService } from "../../gen/partner/v1/api_keys_pb.ts";
import { ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { RequestLogService } from "../../gen/partner/v1/requests_pb.ts";
import { SandboxService } from "../../gen/partner/v1/sandbox_pb.ts";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { createApiKeyHandlers } from "../apikeys/api-key.handlers.ts";
import { createPartnerApiKeyHandlers } from "../apikeys/partner-api-key.handlers.ts";
import {
  createConsentAdminHandlers,
  createConsentHandlers,
  createUserHandlers,
} from "../consent/consent.handlers.ts";
import { createDisbursementHandlers } from "../disbursements/disbursement.handlers.ts";
import { createApiKeyLimitsHandlers, createPartnerLimitsHandlers } from "../limits/limits.handlers.ts";
import { createPartnerHandlers } from "../partners/partner.handlers.ts";
import type { Clock } from "../platform/clock.ts";
import { type BoundService, bind } from "../platform/rpc/binding.ts";
import { createPortalAuthHandlers } from "../portal/portal.handlers.ts";
import type { Portal } from "../portal/portal.ts";
import { createPortalAdminHandlers } from "../portal/portal-admin.handlers.ts";
import { createTeamHandlers } from "../portal/team.handlers.ts";
import { createRequestLogHandlers } from "../requestlog/request-log.handlers.ts";
import { createSandboxHandlers } from "../sandbox/sandbox.handlers.ts";
import { createSandboxAdminHandlers } from "../sandbox/sandbox-admin.handlers.ts";
import { createKeysHandlers, createSigningKeyAdminHandlers } from "../signing/keys.handlers.ts";
import { createIngestHandlers, createSnapshotHandlers } from "../snapshot/snapshot.handlers.ts";
import { createWebhookHandlers } from "../webhooks/webhooks.handlers.ts";
import type { EdgeServices } from "./dependencies.ts";

/** The partner services (`partner.v1`), each implemented once and served on every face of the partner listener. */
export function partnerServices(s: EdgeServices, clock: Clock): BoundService[] {
  return [
    bind(KeysService, createKeysHandlers(s.signingKeys)),
    // Portal sessions only: an API key is refused (docs/portal.md).
    bind(PartnerApiKeyService, createPartnerApiKeyHandlers(s.apiKeys, clock)),
    bind(RequestLogService, createRequestLogHandlers(s.requestLog)),
    bind(WebhookService, createWebhookHandlers(s.webhooks, s.deliveries)),
    bind(SnapshotService, createSnapshotHandlers(s.snapshots, s.snapshotReads, s.metrics)),
    bind(DisbursementService, createDisbursementHandlers(s.disbursements, s.repayments, s.books)),
    bind(ConsentService, createConsentHandlers(s.consents, s.consentLinks)),
    bind(SandboxService, createSandboxHandlers(s.sandbox, s.disbursements)),
  ];
}

/** The operator's services (`internal.v1`), on the internal listener behind the service token. */
export function internalServices(s: EdgeServices, clock: Clock): BoundService[] {
  return [
    bind(PartnerService, { ...createPartnerHandlers(s.partners), ...createPartnerLimitsHandlers(s.limits) }),
    bind(ApiKeyService, {
      ...createApiKeyHandlers(s.apiKeys, clock),
      ...createApiKeyLimitsHandlers(s.limits),
    }),
    bind(SigningKeyService, createSigningKeyAdminHandlers(s.signingKeys)),
    bind(UserService, createUserHandlers(s.users, s.instruments)),
    bind(IngestService, createIngestHandlers(s.ledger, s.standing)),
    bind(ConsentAdminService, createConsentAdminHandlers(s.consents, s.users, s.consentLinks, s.mandates)),
    bind(PortalAdminService, createPortalAdminHandlers(s.portal.people, s.portal.audit, s.partners)),
    bind(SandboxAdminService, createSandboxAdminHandlers(s.sandbox, s.fixtures, s.partners)),
  ];
}

/** Every portal procedure's path starts so (`/portal.v1.TeamService/ListMembers`). */
export const PORTAL_PROCEDURES = "/portal.v1.";

/** The portal's own Connect services, served on the partner listener behind the portal edge. */
export function portalServices(portal: Portal): BoundService[] {
  return [
    bind(PortalAuthService, createPortalAuthHandlers(portal)),
    bind(TeamService, createTeamHandlers(portal.people, portal.audit)),
  ];
}
