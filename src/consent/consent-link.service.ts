import type { PartnerService } from "../partners/partner.service.ts";
import type { PageProof } from "../person/hosted-page.ts";
import type { CodeSubject, PersonService } from "../person/person.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isHostName } from "../platform/hostname.ts";
import { isId, newId } from "../platform/ids.ts";
import { pageOf, pageSize, unknownCursor } from "../platform/paging.ts";
import { isE164, last4 } from "../platform/phone.ts";
import { type Environment, tenantOf } from "../platform/tenancy.ts";
import { createPageTokenLookup } from "../platform/unknown-set.ts";
import type { UserService } from "../users/user.service.ts";
import { consentRepository as repo } from "./consent.repository.ts";
import {
  type ConsentEvidence,
  type ConsentService,
  checkGrantTerms,
  type GrantTerms,
} from "./consent.service.ts";
import type { ConsentLink } from "./consent-link.entity.ts";

/** Binds a sealed link token to its link. */
export const linkTokenAad = (linkId: string) => `consent-link:${linkId}`;

/** A link as partners and the page see it (status EXPIRED is derived from `expiresAt`). */
export interface LinkView
  extends Omit<ConsentLink, "status" | "tokenHash" | "tokenEnc" | "phoneHash" | "partnerId" | "environment"> {
  status: "PENDING" | "ACCEPTED" | "DECLINED" | "EXPIRED" | "LOCKED";
  url: string;
}

/** What the consent page shows. */
export interface PageView {
  link: LinkView;
  partnerName: string;
  environment: Environment;
}

/** The outcome of a decision. */
export type Decision =
  | { outcome: "accepted"; link: LinkView; consentId: string }
  | { outcome: "declined"; link: LinkView }
  | { outcome: "no_account"; link: LinkView };

/** The outcome of a decision on the page, where the person first proves who they are. */
export type PageDecision =
  | Decision
  | { outcome: "wrong_code"; link: LinkView; triesLeft: number }
  | { outcome: "code_expired"; link: LinkView }
  | { outcome: "locked"; link: LinkView };

/** The outcome of a decision through a prompt session. */
export type SessionDecision = Decision | { outcome: "not_this_person"; link: LinkView };

export type { PageProof };

const DEFAULT_HOURS = 24;
const MAX_HOURS = 168;

/** What {@link createConsentLinkService} returns. */
export type ConsentLinkService = ReturnType<typeof createConsentLinkService>;

/** Options for {@link createConsentLinkService}. */
export interface ConsentLinkServiceOptions {
  clock: Clock;
  box: SecretBox;
  users: UserService;
  consents: ConsentService;
  partners: PartnerService;
  person: PersonService;
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
    // The page's Content-Security-Policy names the redirect's origin: its host may hold nothing but a host.
    if (!isHostName(url.hostname))
      throw validationFailed({ redirectUrl: "must name its host with letters, digits, hyphens and dots" });
    if (raw.length > 2048) throw validationFailed({ redirectUrl: "must be at most 2048 characters" });
    return url.toString();
  };

  const byToken = createPageTokenLookup(
    (em, hash, lock) => repo.findLinkByToken(em, hash, lock),
    "No such consent link.",
  );

  const subjectOf = (row: ConsentLink): CodeSubject => ({
    id: row.id,
    owner: `${row.partnerId}:${row.environment}`,
    environment: row.environment,
    phoneHash: row.phoneHash,
  });

  /** Only a PENDING, unexpired link can be decided, once. */
  const assertPending = (row: ConsentLink): LinkView => {
    const current = view(row);
    if (current.status !== "PENDING")
      throw new ApiError("consent_link_gone", undefined, { details: { status: current.status } });
    return current;
  };

  /** The canonical terms of a link, for a decision made without the page (its hash is kept as evidence). */
  const canonicalTerms = (row: ConsentLink) =>
    JSON.stringify({
      partnerId: row.partnerId,
      scopes: row.scopes,
      ledgerWindowDays: row.ledgerWindowDays,
      maxLedgerWindowDays: row.maxLedgerWindowDays,
    });

  /** Decides a link locked for update, for a person who proved who they are. */
  const decideRow = async (
    tx: Em,
    row: ConsentLink,
    accept: boolean,
    evidence: ConsentEvidence,
  ): Promise<Decision> => {
    const current = assertPending(row);
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
      evidence,
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
      if (!o.person.canSend(tenantOf(em).environment)) {
        throw new ApiError(
          "unavailable",
          "No SMS provider is configured for production, so the person could not be sent the one-time code that proves who they are: consent links cannot be created.",
        );
      }
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

    /**
     * A page of the caller's links, newest first, after `startingAfter` (one of the caller's own), in a
     * status as {@link get} shows it when asked (CONTRACT.md §1).
     */
    async list(
      em: Em,
      status: LinkView["status"] | undefined,
      page: { limit: number; startingAfter: string },
    ): Promise<{ items: LinkView[]; hasMore: boolean }> {
      if (page.startingAfter && !(await repo.findLink(em, page.startingAfter)))
        throw unknownCursor("consent links");
      const limit = pageSize(page.limit);
      const rows = await repo.listLinks(
        em,
        status,
        o.clock.now(),
        page.startingAfter || undefined,
        limit + 1,
      );
      const { items, hasMore } = pageOf(rows, limit);
      return { items: items.map(view), hasMore };
    },

    /** What the page shows for a token, used or not. */
    async page(em: Em, token: string): Promise<PageView> {
      const row = await byToken(em, token, false);
      const names = await o.partners.names(em, [row.partnerId]);
      return { link: view(row), partnerName: names.get(row.partnerId) ?? "", environment: row.environment };
    },

    /**
     * Sends the person a one-time code for the link's page (to the number the platform holds; for a phone
     * with no account, nothing is sent and the page cannot tell). `consent_link_gone` once it is decided,
     * expired or locked; `rate_limited` past the send limits.
     */
    async sendCode(em: Em, token: string): Promise<{ expiresAt: Date }> {
      const row = await byToken(em, token, false);
      assertPending(row);
      const names = await o.partners.names(em, [row.partnerId]);
      const partner = names.get(row.partnerId) ?? "A lender";
      return o.person.send(
        em,
        subjectOf(row),
        (code) =>
          `${code} is your code to answer ${partner}'s request. It expires in 10 minutes. Never share it.`,
      );
    },

    /**
     * The person's decision on the page, with the code they were sent. Only a PENDING, unexpired link can
     * be decided, once: anything else is `consent_link_gone`. A wrong code is counted (five lock the link)
     * and committed; accepting writes the consent, with its evidence, and its event in the same transaction.
     */
    async decide(em: Em, token: string, accept: boolean, proof: PageProof): Promise<PageDecision> {
      return em.transactional(async (tx): Promise<PageDecision> => {
        const row = await byToken(tx, token, true);
        const current = assertPending(row);
        // A phone with no account never gets a code (in the sandbox, where the code is fixed, no code is
        // right for it either): the page answers exactly as for a wrong code, so it is no account oracle.
        const account = await o.users.byPhone(tx, row.environment, row.phoneHash);
        const check = await o.person.check(tx, subjectOf(row), proof.code, account !== undefined);
        if (check === "locked") {
          Object.assign(row, { status: "LOCKED" });
          await repo.save(tx);
          return { outcome: "locked", link: view(row) };
        }
        if (check === "expired" || check === "none") return { outcome: "code_expired", link: current };
        if (check === "wrong")
          return {
            outcome: "wrong_code",
            link: current,
            triesLeft: await o.person.triesLeft(tx, subjectOf(row)),
          };
        return decideRow(tx, row, accept, {
          method: "OTP_SMS",
          at: o.clock.now(),
          ip: proof.ip,
          userAgent: proof.userAgent,
          terms: proof.terms,
        });
      });
    },

    /**
     * The dashboard's consent prompt: a URL that opens this link's page for the signed-in user, once, within
     * `ttlSeconds` (30 to 900). Only a PENDING link of the user's environment.
     */
    async createPrompt(
      em: Em,
      userId: string,
      linkId: string,
      ttlSeconds: number,
    ): Promise<{ url: string; expiresAt: Date }> {
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 30 || ttlSeconds > 900)
        throw validationFailed({ expiresInSeconds: "must be 30 to 900" });
      const environment = await o.users.environmentOf(em, userId);
      if (!environment) throw new ApiError("not_found", `No user ${userId}.`);
      const row = isId("cnl", linkId) ? await repo.findAnyLink(em, linkId) : null;
      if (!row || row.environment !== environment)
        throw new ApiError("not_found", `No consent link ${linkId} in the user's environment.`);
      assertPending(row);
      const { token, expiresAt } = await o.person.createSession(em, {
        userId,
        environment,
        subject: row.id,
        ttlMs: ttlSeconds * 1000,
      });
      return { url: `${o.publicUrl()}/prompt/${token}`, expiresAt };
    },

    /** The token of a link's page (a prompt session opened for the link leads there). */
    async pageToken(em: Em, linkId: string): Promise<string> {
      const row = await repo.findAnyLink(em, linkId);
      if (!row) throw new ApiError("not_found", "No such consent link.");
      return o.box.open(row.tokenEnc, linkTokenAad(row.id)).toString("utf8");
    },

    /** True when the opened session may still answer the link of this page. */
    async sessionFits(em: Em, token: string, sessionId: string): Promise<boolean> {
      const row = await byToken(em, token, false);
      return (await o.person.sessionUser(em, sessionId, row.id, false)) !== undefined;
    },

    /**
     * The signed-in person's decision through a prompt session: only for a link sent to that person's own
     * phone number (a session for one user never answers another's link); the session is then used up.
     */
    async decideWithSession(
      em: Em,
      token: string,
      accept: boolean,
      sessionId: string,
      proof: Omit<PageProof, "code">,
    ): Promise<SessionDecision> {
      return em.transactional(async (tx): Promise<SessionDecision> => {
        const row = await byToken(tx, token, true);
        const current = assertPending(row);
        const sessionUser = await o.person.sessionUser(tx, sessionId, row.id, false);
        const linkUser = await o.users.byPhone(tx, row.environment, row.phoneHash);
        if (!sessionUser || sessionUser !== linkUser) return { outcome: "not_this_person", link: current };
        await o.person.sessionUser(tx, sessionId, row.id, true);
        return decideRow(tx, row, accept, {
          method: "PLATFORM_SESSION",
          at: o.clock.now(),
          ip: proof.ip,
          userAgent: proof.userAgent,
          terms: proof.terms,
        });
      });
    },

    /**
     * The person's decision on a link of the caller's, by id: the sandbox helpers act for the person, as if
     * they had given the sandbox's fixed code on the page (the evidence says `OTP_SMS`).
     */
    async decideById(em: Em, id: string, accept: boolean): Promise<Decision> {
      return em.transactional(async (tx) => {
        const row = isId("cnl", id) ? await repo.findLink(tx, id, true) : null;
        if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
        return decideRow(tx, row, accept, {
          method: "OTP_SMS",
          at: o.clock.now(),
          terms: canonicalTerms(row),
        });
      });
    },
  };
}
