import { LockMode } from "@mikro-orm/core";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { everyTenant, type Tenant } from "../platform/tenancy.ts";
import { type Consent, ConsentEntity } from "./consent.entity.ts";
import { type ConsentLink, ConsentLinkEntity } from "./consent-link.entity.ts";

const forUpdate = { lockMode: LockMode.PESSIMISTIC_WRITE } as const;

/**
 * The consent feature's tables (consents, consent_links): the only code that reads or writes them. A
 * partner's reads go through the tenancy filter the edge set on `em`; the person's and the platform's (the
 * consent page, the dashboard) and the expiry job's name the tenant they act for, or read across tenants
 * with {@link everyTenant}, on each query.
 */
export const consentRepository = {
  /**
   * Deletes a partner's sandbox consent links and consents (the sandbox reset); returns how many of each.
   * Links first: they name the consents they granted.
   */
  async deleteSandbox(tx: Em, partnerId: string): Promise<{ consents: number; links: number }> {
    const links = await sql(
      tx,
      "delete from consent_links where partner_id = $1 and environment = 'sandbox' returning id",
      [partnerId],
    );
    const consents = await sql(
      tx,
      "delete from consents where partner_id = $1 and environment = 'sandbox' returning id",
      [partnerId],
    );
    return { consents: consents.length, links: links.length };
  },

  /** A consent of `em`'s tenant; another tenant's is simply not found. */
  findConsent(em: Em, id: string, lock = false): Promise<Consent | null> {
    return em.findOne(ConsentEntity, { id }, lock ? forUpdate : {});
  },

  /**
   * Up to `limit` of `em`'s tenant's consents, newest first by id, older than `before`: a keyset walk of
   * `consents_by_owner_id` (or, with a status, `consents_by_owner_status`), never another tenant's entries.
   */
  listConsents(
    em: Em,
    filter: { status?: Consent["status"]; userId?: string },
    before: string | undefined,
    limit: number,
  ): Promise<Consent[]> {
    return em.find(
      ConsentEntity,
      {
        ...(filter.status ? { status: filter.status } : {}),
        ...(filter.userId ? { userId: filter.userId } : {}),
        ...(before ? { id: { $lt: before } } : {}),
      },
      { orderBy: { id: "desc" }, limit },
    );
  },

  /**
   * Up to `limit` of `em`'s tenant's links, newest first by id, older than `before`, in a status as partners
   * see it at `now` (a PENDING link past its expiry is EXPIRED).
   */
  listLinks(
    em: Em,
    status: ConsentLink["status"] | "EXPIRED" | undefined,
    now: Date,
    before: string | undefined,
    limit: number,
  ): Promise<ConsentLink[]> {
    const shown =
      status === undefined
        ? {}
        : status === "PENDING"
          ? { status, expiresAt: { $gt: now } }
          : status === "EXPIRED"
            ? { status: "PENDING" as const, expiresAt: { $lte: now } }
            : { status };
    return em.find(
      ConsentLinkEntity,
      { ...shown, ...(before ? { id: { $lt: before } } : {}) },
      { orderBy: { id: "desc" }, limit },
    );
  },

  /** A consent of any tenant, locked (the person revokes it from the platform's dashboard). */
  findConsentForUser(em: Em, id: string): Promise<Consent | null> {
    return em.findOne(ConsentEntity, { id }, { ...forUpdate, ...everyTenant });
  },

  /** The newest consent the user gave `em`'s tenant, whatever its status. */
  newestConsent(em: Em, userId: string): Promise<Consent | null> {
    return em.findOne(ConsentEntity, { userId }, { orderBy: { grantedAt: "desc", id: "desc" } });
  },

  /**
   * The status and expiry of the newest consent the user gave a tenant (another feature's check, before
   * every disbursement). Raw on this hot path: one indexed row, where building the entity query cost more
   * than running it.
   */
  async newestConsentState(
    em: Em,
    tenant: Tenant,
    userId: string,
  ): Promise<Pick<Consent, "status" | "expiresAt"> | undefined> {
    const [row] = await sql<{ status: Consent["status"]; expires_at: Date }>(
      em,
      `select status, expires_at from consents where partner_id = $1 and environment = $2 and user_id = $3
        order by granted_at desc, id desc limit 1`,
      [tenant.partnerId, tenant.environment, userId],
    );
    return row && { status: row.status, expiresAt: row.expires_at };
  },

  /** The tenants holding an ACTIVE, unexpired consent of the user that covers `scope`. */
  async holders(em: Em, userId: string, scope: string, now: Date): Promise<Tenant[]> {
    const rows = await em.find(
      ConsentEntity,
      { userId, status: "ACTIVE", expiresAt: { $gt: now }, scopes: { $contains: [scope] } },
      { fields: ["partnerId", "environment"], ...everyTenant },
    );
    const seen = new Map(rows.map((r) => [`${r.partnerId}:${r.environment}`, r]));
    return [...seen.values()].map((r) => ({ partnerId: r.partnerId, environment: r.environment }));
  },

  /** Every consent of a user, newest first, across partners (the dashboard's list). */
  consentsOfUser(em: Em, userId: string): Promise<Consent[]> {
    return em.find(ConsentEntity, { userId }, { orderBy: { grantedAt: "desc", id: "desc" }, ...everyTenant });
  },

  /** ACTIVE consents past their expiry, locked, skipping those another worker holds. */
  dueToExpire(em: Em, now: Date, limit: number): Promise<Consent[]> {
    return em.find(
      ConsentEntity,
      { status: "ACTIVE", expiresAt: { $lte: now } },
      { orderBy: { expiresAt: "asc" }, limit, lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE, ...everyTenant },
    );
  },

  /**
   * Grants for one person, partner and environment take turns (a transaction-scoped advisory lock), so two
   * at once cannot both see "no active consent" and collide on the one-active index.
   */
  async lockGrants(em: Em, tenant: Tenant, userId: string): Promise<void> {
    await sql(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `consent:${tenant.partnerId}:${tenant.environment}:${userId}`,
    ]);
  },

  /** The tenant's ACTIVE consent of the user, if any (under {@link lockGrants}). */
  activeConsent(em: Em, tenant: Tenant, userId: string): Promise<Consent | null> {
    return em.findOne(
      ConsentEntity,
      { partnerId: tenant.partnerId, environment: tenant.environment, userId, status: "ACTIVE" },
      everyTenant,
    );
  },

  /** Adds a consent. */
  async insertConsent(em: Em, row: Consent): Promise<Consent> {
    const consent = em.create(ConsentEntity, row);
    await em.flush();
    return consent;
  },

  /** A link of `em`'s tenant, locked when asked. */
  findLink(em: Em, id: string, lock = false): Promise<ConsentLink | null> {
    return em.findOne(ConsentLinkEntity, { id }, lock ? forUpdate : {});
  },

  /** A link by the hash of its URL's token, whoever's it is (the person opening the page). */
  /** A link of any tenant (the platform's prompt names it by id). */
  findAnyLink(em: Em, id: string, lock = false): Promise<ConsentLink | null> {
    return em.findOne(ConsentLinkEntity, { id }, { ...(lock ? forUpdate : {}), ...everyTenant });
  },

  findLinkByToken(em: Em, tokenHash: Buffer, lock = false): Promise<ConsentLink | null> {
    return em.findOne(ConsentLinkEntity, { tokenHash }, { ...(lock ? forUpdate : {}), ...everyTenant });
  },

  /** Adds a link. */
  async insertLink(em: Em, row: ConsentLink): Promise<ConsentLink> {
    const link = em.create(ConsentLinkEntity, row);
    await em.flush();
    return link;
  },

  /** Writes the changes made to loaded consents and links. */
  save(em: Em): Promise<void> {
    return em.flush();
  },
};
