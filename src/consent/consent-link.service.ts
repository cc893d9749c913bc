import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import { tenantOf } from "../platform/tenancy.ts";
import type { UserService } from "../users/user.service.ts";
import { consentRepository as repo } from "./consent.repository.ts";
import { type ConsentService, checkGrantTerms, type GrantTerms } from "./consent.service.ts";
import type { ConsentLink } from "./consent-link.entity.ts";
import { isE164, last4 } from "./phone.ts";

/** Binds a sealed link token to its link. */
export const linkTokenAad = (linkId: string) => `consent-link:${linkId}`;

/** A link as partners and the page see it (status EXPIRED is derived from `expiresAt`). */
export interface LinkView
  extends Omit<ConsentLink, "status" | "tokenHash" | "tokenEnc" | "phoneHash" | "partnerId" | "environment"> {
  status: "PENDING" | "ACCEPTED" | "DECLINED" | "EXPIRED";
  url: string;
}

/** What the consent page shows. */
export interface PageView {
  link: LinkView;
  partnerName: string;
}

/** The outcome of a decision on the page. */
export type Decision =
  | { outcome: "accepted"; link: LinkView; consentId: string }
  | { outcome: "declined"; link: LinkView }
  | { outcome: "no_account"; link: LinkView };

const DEFAULT_HOURS = 24;
const MAX_HOURS = 168;
const TOKEN = /^[0-9A-Za-z]{32}$/;

/** What {@link createConsentLinkService} returns. */
export type ConsentLinkService = ReturnType<typeof createConsentLinkService>;

/** Options for {@link createConsentLinkService}. */
export interface ConsentLinkServiceOptions {
  clock: Clock;
  box: SecretBox;
  users: UserService;
  consents: ConsentService;
  partners: PartnerService;
  /** Base URL of the consent pages (PUBLIC_URL, or the partner listener). */
  publicUrl: () => string;
  allowLocalRedirects: boolean;
}

/**
 * Consent links (CONTRACT.md §4): single-use pages sent to a person by phone number. The URL carries a
 * random token, stored only as a hash (and sealed, so the partner can read the URL again); the link's id is
 * not a credential.
 */
export function createConsentLinkService(o: ConsentLinkServiceOptions) {
  const view = (row: ConsentLink): LinkView => {
    const token = o.box.open(row.tokenEnc, linkTokenAad(row.id)).toString("utf8");
    const expired = row.status === "PENDING" && row.expiresAt <= o.clock.now();
    return {
      id: row.id,
      phoneLast4: row.phoneLast4,
      scopes: row.scopes,
      ledgerWindowDays: row.ledgerWindowDays,
      maxLedgerWindowDays: row.maxLedgerWindowDays,
      redirectUrl: row.redirectUrl,
      consentId: row.consentId,
      expiresAt: row.expiresAt,
      decidedAt: row.decidedAt,
      createdAt: row.createdAt,
      status: expired ? "EXPIRED" : row.status,
      url: `${o.publicUrl()}/consent/${token}`,
    };
  };

  const checkRedirect = (raw: string): string | null => {
    if (raw === "") return null;
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw validationFailed({ redirectUrl: "must be an absolute URL" });
    }
    const local = o.allowLocalRedirects && url.protocol === "http:";
    if (url.protocol !== "https:" && !local) throw validationFailed({ redirectUrl: "must use https" });
    if (url.username || url.password) throw validationFailed({ redirectUrl: "may not carry credentials" });
    if (raw.length > 2048) throw validationFailed({ redirectUrl: "must be at most 2048 characters" });
    return url.toString();
  };

  const byToken = async (em: Em, token: string, lock: boolean): Promise<ConsentLink> => {
    const row = TOKEN.test(token) ? await repo.findLinkByToken(em, sha256(token), lock) : null;
    if (!row) throw new ApiError("not_found", "No such consent link.");
    return row;
  };

  /** Decides a link locked for update: only a PENDING, unexpired link can be decided, once. */
  const decideRow = async (tx: Em, row: ConsentLink, accept: boolean): Promise<Decision> => {
    const current = view(row);
    if (current.status !== "PENDING")
      throw new ApiError("consent_link_gone", undefined, { details: { status: current.status } });
    const now = o.clock.now();
    if (!accept) {
      Object.assign(row, { status: "DECLINED", decidedAt: now });
      await repo.save(tx);
      return { outcome: "declined", link: view(row) };
    }
    const userId = await o.users.byPhone(tx, row.environment, row.phoneHash);
    if (!userId) return { outcome: "no_account", link: current };
    const consent = await o.consents.grant(tx, {
      partnerId: row.partnerId,
      environment: row.environment,
      userId,
      scopes: row.scopes,
      ledgerWindowDays: row.ledgerWindowDays,
      maxLedgerWindowDays: row.maxLedgerWindowDays,
      source: "CONSENT_LINK",
    });
    Object.assign(row, { status: "ACCEPTED", decidedAt: now, consentId: consent.id });
    await repo.save(tx);
    return { outcome: "accepted", link: view(row), consentId: consent.id };
  };

  return {
    async create(
      em: Em,
      input: GrantTerms & { phoneNumber: string; expiresInHours: number | undefined; redirectUrl: string },
    ): Promise<LinkView> {
      if (!isE164(input.phoneNumber)) throw new ApiError("invalid_phone_number");
      const terms = checkGrantTerms(input);
      const hours = input.expiresInHours ?? DEFAULT_HOURS;
      if (!Number.isInteger(hours) || hours < 1 || hours > MAX_HOURS) {
        throw validationFailed({ expiresInHours: `must be 1 to ${MAX_HOURS}` });
      }
      const redirect = checkRedirect(input.redirectUrl);
      const id = newId("cnl");
      const token = randomBase62(32);
      const now = o.clock.now();
      return inTransaction(em, async (tx) => {
        const tenant = tenantOf(tx);
        const row = await repo.insertLink(tx, {
          id,
          partnerId: tenant.partnerId,
          environment: tenant.environment,
          tokenHash: sha256(token),
          tokenEnc: o.box.seal(Buffer.from(token), linkTokenAad(id)),
          phoneHash: o.users.phoneHash(input.phoneNumber),
          phoneLast4: last4(input.phoneNumber),
          scopes: terms.scopes,
          ledgerWindowDays: terms.ledgerWindowDays,
          maxLedgerWindowDays: terms.maxLedgerWindowDays,
          redirectUrl: redirect,
          status: "PENDING",
          consentId: null,
          expiresAt: new Date(now.getTime() + hours * ms.hour),
          decidedAt: null,
          createdAt: now,
        });
        return view(row);
      });
    },

    async get(em: Em, id: string): Promise<LinkView> {
      const row = isId("cnl", id) ? await repo.findLink(em, id) : null;
      if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
      return view(row);
    },

    /** What the page shows for a token, used or not. */
    async page(em: Em, token: string): Promise<PageView> {
      const row = await byToken(em, token, false);
      const names = await o.partners.names(em, [row.partnerId]);
      return { link: view(row), partnerName: names.get(row.partnerId) ?? "" };
    },

    /**
     * The person's decision. Only a PENDING, unexpired link can be decided, once: anything else is
     * `consent_link_gone`. Accepting writes the consent (and its event) in the same transaction.
     */
    async decide(em: Em, token: string, accept: boolean): Promise<Decision> {
      return em.transactional(async (tx) => decideRow(tx, await byToken(tx, token, true), accept));
    },

    /** The person's decision on a link of the caller's, by id (the sandbox helpers act for the person). */
    async decideById(em: Em, id: string, accept: boolean): Promise<Decision> {
      return em.transactional(async (tx) => {
        const row = isId("cnl", id) ? await repo.findLink(tx, id, true) : null;
        if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
        return decideRow(tx, row, accept);
      });
    },
  };
}
