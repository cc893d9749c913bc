import type { PartnerService } from "../partners/partner.service.ts";
import {
  createDecisionFlow,
  type DecisionFlow,
  type DecisionSubject,
  type PageProof,
} from "../person/hosted-pages.service.ts";
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

/** A link's status now: a PENDING link past its time is EXPIRED. */
function statusOf(o: ConsentLinkServiceOptions, row: ConsentLink): LinkView["status"] {
  return row.status === "PENDING" && row.expiresAt <= o.clock.now() ? "EXPIRED" : row.status;
}

function linkView(o: ConsentLinkServiceOptions, row: ConsentLink): LinkView {
  const token = o.box.open(row.tokenEnc, linkTokenAad(row.id)).toString("utf8");
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
    status: statusOf(o, row),
    url: `${o.publicUrl()}/consent/${token}`,
  };
}

/** The partner's redirect after a decision: an absolute https URL (or http, where local redirects are allowed), or none. */
function checkRedirect(o: ConsentLinkServiceOptions, raw: string): string | null {
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
}

/** Whom a link's codes go to: the phone it was sent to, counted per partner and environment. */
const subjectOf = (row: ConsentLink): CodeSubject => ({
  id: row.id,
  owner: `${row.partnerId}:${row.environment}`,
  environment: row.environment,
  phoneHash: row.phoneHash,
});

/** The canonical terms of a link, for a decision made without the page (its hash is kept as evidence). */
const canonicalTerms = (row: ConsentLink) =>
  JSON.stringify({
    partnerId: row.partnerId,
    scopes: row.scopes,
    ledgerWindowDays: row.ledgerWindowDays,
    maxLedgerWindowDays: row.maxLedgerWindowDays,
  });

/**
 * Decides a link locked for update, still PENDING (the caller checked), for a person who proved who they are:
 * accepting grants the consent, with its evidence and its event, in the same transaction.
 */
async function decideRow(
  o: ConsentLinkServiceOptions,
  tx: Em,
  row: ConsentLink,
  accept: boolean,
  evidence: ConsentEvidence,
): Promise<Decision> {
  const current = linkView(o, row);
  const now = o.clock.now();
  if (!accept) {
    Object.assign(row, { status: "DECLINED", decidedAt: now });
    await repo.save(tx);
    return { outcome: "declined", link: linkView(o, row) };
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
  return { outcome: "accepted", link: linkView(o, row), consentId: consent.id };
}

/** Looks a link up by its page's token (unknown tokens are remembered, see createPageTokenLookup). */
type ByToken = (em: Em, token: string, lock: boolean) => Promise<ConsentLink>;

/**
 * A consent link as a hosted decision: sent to a phone number, so it is for whoever holds the account of that
 * number; five wrong codes lock it (LOCKED); accepting grants the consent.
 */
function linkDecisions(o: ConsentLinkServiceOptions, byToken: ByToken): DecisionSubject<ConsentLink> {
  return {
    goneCode: "consent_link_gone",
    byToken,
    id: (row) => row.id,
    partnerId: (row) => row.partnerId,
    closedAs(row) {
      const status = statusOf(o, row);
      return status === "PENDING" ? undefined : status;
    },
    codeSubject: async (_em, row) => subjectOf(row),
    codeMessage: (code, partner) =>
      `${code} is your code to answer ${partner}'s request. It expires in 10 minutes. Never share it.`,
    holder: (em, row) => o.users.byPhone(em, row.environment, row.phoneHash),
    async lockOut(tx, row) {
      Object.assign(row, { status: "LOCKED" });
      await repo.save(tx);
    },
    record: (tx, row, accept, evidence) => decideRow(o, tx, row, accept, evidence),
    async forPrompt(em, userId, linkId) {
      const environment = await o.users.environmentOf(em, userId);
      if (!environment) throw new ApiError("not_found", `No user ${userId}.`);
      const row = isId("cnl", linkId) ? await repo.findAnyLink(em, linkId) : null;
      if (!row || row.environment !== environment)
        throw new ApiError("not_found", `No consent link ${linkId} in the user's environment.`);
      return { row, environment };
    },
  };
}

/** What the service's steps share: its options and the page's decision flow. */
interface Links {
  o: ConsentLinkServiceOptions;
  flow: DecisionFlow<ConsentLink>;
}

async function create(
  { o }: Links,
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
  const redirect = checkRedirect(o, input.redirectUrl);
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
    return linkView(o, row);
  });
}

async function list(
  { o }: Links,
  em: Em,
  status: LinkView["status"] | undefined,
  page: { limit: number; startingAfter: string },
): Promise<{ items: LinkView[]; hasMore: boolean }> {
  if (page.startingAfter && !(await repo.findLink(em, page.startingAfter)))
    throw unknownCursor("consent links");
  const limit = pageSize(page.limit);
  const rows = await repo.listLinks(em, status, o.clock.now(), page.startingAfter || undefined, limit + 1);
  const { items, hasMore } = pageOf(rows, limit);
  return { items: items.map((row) => linkView(o, row)), hasMore };
}

/**
 * The person's decision on a link of the caller's, by id: the sandbox helpers act for the person, as if they
 * had given the sandbox's fixed code on the page (the evidence says `OTP_SMS`).
 */
function decideById({ o, flow }: Links, em: Em, id: string, accept: boolean): Promise<Decision> {
  return em.transactional(async (tx) => {
    const row = isId("cnl", id) ? await repo.findLink(tx, id, true) : null;
    if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
    flow.assertOpen(row);
    return decideRow(o, tx, row, accept, {
      method: "OTP_SMS",
      at: o.clock.now(),
      terms: canonicalTerms(row),
    });
  });
}

/**
 * Consent links (CONTRACT.md §4): single-use pages sent to a person by phone number. The URL carries a
 * random token, stored only as a hash (and sealed, so the partner can read the URL again); the link's id is
 * not a credential. The page's decision (the person's code or prompt session, once) is the hosted pages'
 * decision flow.
 */
export function createConsentLinkService(o: ConsentLinkServiceOptions) {
  const byToken = createPageTokenLookup(
    (em, hash, lock) => repo.findLinkByToken(em, hash, lock),
    "No such consent link.",
  );
  const flow = createDecisionFlow(o, linkDecisions(o, byToken));
  const links: Links = { o, flow };
  return {
    create: (
      em: Em,
      input: GrantTerms & { phoneNumber: string; expiresInHours: number | undefined; redirectUrl: string },
    ) => create(links, em, input),

    async get(em: Em, id: string): Promise<LinkView> {
      const row = isId("cnl", id) ? await repo.findLink(em, id) : null;
      if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
      return linkView(o, row);
    },

    /**
     * A page of the caller's links, newest first, after `startingAfter` (one of the caller's own), in a
     * status as {@link get} shows it when asked (CONTRACT.md §1).
     */
    list: (em: Em, status: LinkView["status"] | undefined, page: { limit: number; startingAfter: string }) =>
      list(links, em, status, page),

    /** What the page shows for a token, used or not. */
    async page(em: Em, token: string): Promise<PageView> {
      const row = await byToken(em, token, false);
      const names = await o.partners.names(em, [row.partnerId]);
      return {
        link: linkView(o, row),
        partnerName: names.get(row.partnerId) ?? "",
        environment: row.environment,
      };
    },

    /** Texts the person a code for the link's page; `consent_link_gone` once decided, expired or locked. */
    sendCode: flow.sendCode,
    /** The person's decision on the page, with their code; a LOCKED link after five wrong ones. */
    decide: flow.decide,
    /** The dashboard's consent prompt for a PENDING link of the user's environment (30 to 900 seconds). */
    createPrompt: flow.createPrompt,

    /** The token of a link's page (a prompt session opened for the link leads there). */
    async pageToken(em: Em, linkId: string): Promise<string> {
      const row = await repo.findAnyLink(em, linkId);
      if (!row) throw new ApiError("not_found", "No such consent link.");
      return o.box.open(row.tokenEnc, linkTokenAad(row.id)).toString("utf8");
    },

    sessionFits: flow.sessionFits,
    /** The signed-in person's decision through a prompt session, for a link sent to their own number. */
    decideWithSession: flow.decideWithSession,
    decideById: (em: Em, id: string, accept: boolean) => decideById(links, em, id, accept),
  };
}
