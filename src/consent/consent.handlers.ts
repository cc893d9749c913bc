import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ConsentAdminService, UserService as UserApi } from "../../gen/internal/v1/users_pb.ts";
import {
  Authentication_Method,
  Consent_RevokedBy,
  Consent_Source,
  Consent_Status,
  Consent_StatusSchema,
  type ConsentService as ConsentApi,
  ConsentLink_Status,
  ConsentLink_StatusSchema,
  type ConsentLinkSchema,
  type ConsentSchema,
} from "../../gen/partner/v1/consents_pb.ts";
import type { Em } from "../platform/db/orm.ts";
import { validationFailed } from "../platform/errors.ts";
import { emOf, replicaRead } from "../platform/rpc/context.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { PaymentInstrumentStore, UserService } from "../users/user.service.ts";
import type { Consent, ConsentService } from "./consent.service.ts";
import type { ConsentLinkService, LinkView } from "./consent-link.service.ts";

const ts = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);

/** A consent in the contract's shape. */
export function toConsent(c: Consent): MessageInitShape<typeof ConsentSchema> {
  return {
    id: c.id,
    userId: c.userId,
    status: Consent_Status[c.status],
    scopes: c.scopes,
    ledgerWindowDays: c.ledgerWindowDays,
    maxLedgerWindowDays: c.maxLedgerWindowDays,
    source: Consent_Source[c.source],
    grantedAt: ts(c.grantedAt),
    expiresAt: ts(c.expiresAt),
    revokedAt: ts(c.revokedAt),
    revokedBy: c.revokedBy ? Consent_RevokedBy[c.revokedBy] : Consent_RevokedBy.REVOKED_BY_UNSPECIFIED,
    supersededBy: c.supersededBy ?? "",
    authentication: c.authMethod
      ? { method: Authentication_Method[c.authMethod], at: ts(c.authenticatedAt) }
      : undefined,
  };
}

/** A consent link in the contract's shape. */
export function toLink(l: LinkView): MessageInitShape<typeof ConsentLinkSchema> {
  return {
    id: l.id,
    url: l.url,
    status: ConsentLink_Status[l.status],
    phoneNumberLast4: l.phoneLast4,
    scopes: l.scopes,
    ledgerWindowDays: l.ledgerWindowDays,
    maxLedgerWindowDays: l.maxLedgerWindowDays,
    expiresAt: ts(l.expiresAt),
    consentId: l.consentId ?? "",
    redirectUrl: l.redirectUrl ?? "",
    createdAt: ts(l.createdAt),
    decidedAt: ts(l.decidedAt),
  };
}

/** `partner.v1.ConsentService`. */
export function createConsentHandlers(
  consents: ConsentService,
  links: ConsentLinkService,
): ServiceImpl<typeof ConsentApi> {
  return {
    async getConsent(req, ctx) {
      return { consent: toConsent(await replicaRead(ctx.values, (em) => consents.get(em, req.id))) };
    },
    async getUserConsent(req, ctx) {
      return {
        consent: toConsent(await replicaRead(ctx.values, (em) => consents.newestForUser(em, req.userId))),
      };
    },
    async listConsents(req, ctx) {
      const status = req.status
        ? (Consent_StatusSchema.value[req.status]?.name as Consent["status"])
        : undefined;
      const page = await replicaRead(ctx.values, (em) =>
        consents.list(
          em,
          { status, userId: req.userId || undefined },
          { limit: req.limit, startingAfter: req.startingAfter },
        ),
      );
      return { consents: page.items.map(toConsent), hasMore: page.hasMore };
    },
    async listConsentLinks(req, ctx) {
      const status = req.status
        ? (ConsentLink_StatusSchema.value[req.status]?.name as LinkView["status"])
        : undefined;
      const page = await replicaRead(ctx.values, (em) =>
        links.list(em, status, { limit: req.limit, startingAfter: req.startingAfter }),
      );
      return { consentLinks: page.items.map(toLink), hasMore: page.hasMore };
    },
    async revokeConsent(req, ctx) {
      return {
        consent: toConsent(await consents.revokeByPartner(emOf(ctx.values), req.id)),
      };
    },
    async createConsentLink(req, ctx) {
      const link = await links.create(emOf(ctx.values), {
        phoneNumber: req.phoneNumber,
        scopes: req.scopes,
        ledgerWindowDays: req.ledgerWindowDays,
        maxLedgerWindowDays: req.maxLedgerWindowDays,
        expiresInHours: req.expiresInHours,
        redirectUrl: req.redirectUrl,
      });
      return { consentLink: toLink(link) };
    },
    async getConsentLink(req, ctx) {
      return { consentLink: toLink(await replicaRead(ctx.values, (em) => links.get(em, req.id))) };
    },
  };
}

function environmentOr(value: string, fallback: Environment): Environment {
  if (value === "") return fallback;
  if (value === "sandbox" || value === "production") return value;
  throw validationFailed({ environment: 'must be "sandbox" or "production"' });
}

/** `internal.v1.UserService`: the platform feeds its users. */
export function createUserHandlers(
  users: UserService,
  instruments: PaymentInstrumentStore,
): ServiceImpl<typeof UserApi> {
  return {
    async setPaymentInstruments(req, ctx) {
      return instruments.put(emOf(ctx.values), req.userId, {
        bankRecipientCode: req.bankRecipientCode,
        walletRecipientCode: req.walletRecipientCode,
        debitAuthorizationCode: req.debitAuthorizationCode,
        debitEmail: req.debitEmail,
      });
    },
    async upsertUser(req, ctx) {
      const { created } = await users.upsert(emOf(ctx.values), {
        id: req.id,
        phoneNumber: req.phoneNumber,
        segment: req.segment,
        createdAt: req.createdAt ? timestampDate(req.createdAt) : undefined,
        environment: environmentOr(req.environment, "production"),
      });
      return { id: req.id, created };
    },
  };
}

/**
 * What a prompt session for a disbursement's mandate is made by (the disbursements' mandate service, given by
 * the edge): consents come before disbursements, so this feature names only what it needs of it.
 */
export interface MandatePrompts {
  createPrompt(
    em: Em,
    userId: string,
    disbursementId: string,
    ttlSeconds: number,
  ): Promise<{ url: string; expiresAt: Date }>;
}

/** `internal.v1.ConsentAdminService`: the dashboard's grant and revoke. */
export function createConsentAdminHandlers(
  consents: ConsentService,
  users: UserService,
  links: ConsentLinkService,
  mandates: MandatePrompts,
): ServiceImpl<typeof ConsentAdminService> {
  return {
    async createPromptSession(req, ctx) {
      if ((req.consentLinkId === "") === (req.disbursementId === ""))
        throw validationFailed({ consentLinkId: "give exactly one of consentLinkId and disbursementId" });
      const ttl = req.expiresInSeconds || 300;
      const { url, expiresAt } = req.disbursementId
        ? await mandates.createPrompt(emOf(ctx.values), req.userId, req.disbursementId, ttl)
        : await links.createPrompt(emOf(ctx.values), req.userId, req.consentLinkId, ttl);
      return { url, expiresAt: timestampFromDate(expiresAt) };
    },
    async grantConsent(req, ctx) {
      const em = emOf(ctx.values);
      const userEnvironment = (await users.environmentOf(em, req.userId)) ?? "production";
      const consent = await consents.grant(em, {
        partnerId: req.partnerId,
        environment: environmentOr(req.environment, userEnvironment),
        userId: req.userId,
        scopes: req.scopes,
        ledgerWindowDays: req.ledgerWindowDays,
        maxLedgerWindowDays: req.maxLedgerWindowDays,
        source: "DASHBOARD",
        expiresAt: req.expiresAt ? timestampDate(req.expiresAt) : undefined,
        // The platform grants from its own dashboard, where the person is signed in.
        evidence: {
          method: "DASHBOARD",
          terms: JSON.stringify({
            partnerId: req.partnerId,
            scopes: req.scopes,
            ledgerWindowDays: req.ledgerWindowDays,
            maxLedgerWindowDays: req.maxLedgerWindowDays,
          }),
        },
      });
      return { consent: toConsent(consent) };
    },
    async revokeConsent(req, ctx) {
      return { consent: toConsent(await consents.revokeByUser(emOf(ctx.values), req.consentId)) };
    },
    async listUserConsents(req, ctx) {
      const rows = await consents.listForUser(emOf(ctx.values), req.userId);
      return {
        consents: rows.map((r) => ({
          consent: toConsent(r),
          partnerId: r.partnerId,
          partnerName: r.partnerName,
          environment: r.environment,
        })),
      };
    },
  };
}
