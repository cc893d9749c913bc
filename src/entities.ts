import { ApiKeyEntity } from "./apikeys/api-key.entity.ts";
import { ConsentEntity } from "./consent/consent.entity.ts";
import { ConsentLinkEntity } from "./consent/consent-link.entity.ts";
import { BookEntryEntity } from "./disbursements/book-entry.entity.ts";
import { DisbursementEntity } from "./disbursements/disbursement.entity.ts";
import { InstallmentEntity } from "./disbursements/installment.entity.ts";
import { RepaymentDueEntity, RepaymentHistoryEntity } from "./disbursements/repayment-history.entity.ts";
import { SandboxDebitEntity } from "./disbursements/sandbox-debit.entity.ts";
import { SandboxRefundEntity } from "./disbursements/sandbox-refund.entity.ts";
import { SandboxTransferEntity } from "./disbursements/sandbox-transfer.entity.ts";
import { IdempotencyKeyEntity } from "./idempotency/idempotency-key.entity.ts";
import {
  LedgerCounterpartyDayEntity,
  LedgerCounterpartyEntity,
} from "./ledger/ledger-counterparty.entity.ts";
import { LedgerDailyEntity } from "./ledger/ledger-daily.entity.ts";
import { LedgerEntryEntity } from "./ledger/ledger-entry.entity.ts";
import { LimitOverrideEntity } from "./limits/limit-override.entity.ts";
import { PartnerEntity } from "./partners/partner.entity.ts";
import { PersonCodeEntity } from "./person/person-code.entity.ts";
import { PromptSessionEntity } from "./person/prompt-session.entity.ts";
import { DataKeyEntity } from "./platform/crypto/data-key.entity.ts";
import type { Schema } from "./platform/db/orm.ts";
import { ReplicaHasApplied } from "./platform/db/replica-applied.routine.ts";
import { InstanceListenerEntity } from "./platform/http/listener-registry.entity.ts";
import { PortalAuditEventEntity } from "./portal/audit-event.entity.ts";
import { PortalInviteEntity } from "./portal/invite.entity.ts";
import { PortalMemberEntity } from "./portal/member.entity.ts";
import { PortalSessionEntity } from "./portal/session.entity.ts";
import { PortalSigninThrottleEntity } from "./portal/signin-throttle.entity.ts";
import { RateLimitBucketEntity } from "./ratelimit/rate-limit-bucket.entity.ts";
import { RateLimitTake } from "./ratelimit/rate-limit-take.routine.ts";
import { RequestLogEntity } from "./requestlog/request-log.entity.ts";
import { SandboxFixtureEntity } from "./sandbox/sandbox-fixture.entity.ts";
import { SigningKeyEntity } from "./signing/signing-key.entity.ts";
import { SnapshotRow } from "./snapshot/snapshot-row.routine.ts";
import { KycEntity } from "./standing/kyc.entity.ts";
import { SandboxStandingEntity } from "./standing/sandbox-standing.entity.ts";
import { StandingEntity } from "./standing/standing.entity.ts";
import { PaymentInstrumentEntity } from "./users/payment-instrument.entity.ts";
import { UserEntity } from "./users/user.entity.ts";
import { WebhookAttemptEntity } from "./webhooks/attempt.entity.ts";
import { WebhookDeliveryEntity } from "./webhooks/delivery.entity.ts";
import { EventEntity } from "./webhooks/event.entity.ts";
import { WebhookEntity } from "./webhooks/webhook.entity.ts";

/**
 * Every entity of the service, listed here at the composition root (the platform's ORM is given the list and
 * knows no feature): one per table the migrations create, so MikroORM's schema diff against the
 * migrated database is empty (`test/integration/schema.test.ts` keeps it so).
 */
export const entities = [
  PartnerEntity,
  ApiKeyEntity,
  SigningKeyEntity,
  RateLimitBucketEntity,
  LimitOverrideEntity,
  WebhookEntity,
  EventEntity,
  WebhookDeliveryEntity,
  WebhookAttemptEntity,
  IdempotencyKeyEntity,
  UserEntity,
  ConsentEntity,
  ConsentLinkEntity,
  PersonCodeEntity,
  PromptSessionEntity,
  LedgerEntryEntity,
  LedgerDailyEntity,
  LedgerCounterpartyEntity,
  LedgerCounterpartyDayEntity,
  StandingEntity,
  SandboxStandingEntity,
  KycEntity,
  DisbursementEntity,
  InstallmentEntity,
  RepaymentHistoryEntity,
  RepaymentDueEntity,
  BookEntryEntity,
  SandboxDebitEntity,
  SandboxRefundEntity,
  SandboxTransferEntity,
  PaymentInstrumentEntity,
  SandboxFixtureEntity,
  DataKeyEntity,
  InstanceListenerEntity,
  PortalMemberEntity,
  PortalInviteEntity,
  PortalSessionEntity,
  PortalAuditEventEntity,
  PortalSigninThrottleEntity,
  RequestLogEntity,
];

/** Every stored routine the migrations create, declared so the schema diff compares them too. */
export const routines = [RateLimitTake, ReplicaHasApplied, SnapshotRow];

/** What the platform's ORM is opened with: every entity and stored routine of the service. */
export const schema: Schema = { entities, routines };
