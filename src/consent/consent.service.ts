import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction, sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { Outbox } from "../webhooks/outbox.ts";
import { scopes as allScopes, isScope } from "./scopes.ts";

/** A consent as stored. */
export interface ConsentRow {
  id: string;
  partner_id: string;
  environment: Environment;
  user_id: string;
  status: "ACTIVE" | "REVOKED" | "EXPIRED";
  scopes: string[];
  ledger_window_days: number;
  max_ledger_window_days: number;
  source: "DASHBOARD" | "CONSENT_LINK";
  granted_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  revoked_by: "USER" | "PARTNER" | "SYSTEM" | null;
  superseded_by: string | null;
}

/** What a grant asks for, checked by {@link checkGrantTerms}. */
export interface GrantTerms {
  scopes: string[];
  ledgerWindowDays: number;
  /** 0 means "the same as ledgerWindowDays". */
  maxLedgerWindowDays: number;
}

/**
 * The 403 a read or a disbursement gets under the user's newest consent (CONTRACT.md §3), or undefined
 * when it is ACTIVE and unexpired. Checked against `now`, so an expiry the job has not processed yet counts.
 */
export function consentRefusal(
  consent: { status: string; expires_at: Date | string } | undefined | null,
  now: Date,
): "consent_required" | "consent_revoked" | "consent_expired" | undefined {
  if (!consent) return "consent_required";
  if (consent.status === "REVOKED") return "consent_revoked";
  if (consent.status === "EXPIRED" || new Date(consent.expires_at).getTime() <= now.getTime())
    return "consent_expired";
  return undefined;
}

/** A consent lasts a year unless the grant says otherwise. */
export const DEFAULT_CONSENT_MS = 365 * ms.day;

/** Checks scopes and windows (CONTRACT.md §3–4) and returns them normalised. */
export function checkGrantTerms(t: GrantTerms): {
  scopes: string[];
  ledgerWindowDays: number;
  maxLedgerWindowDays: number;
} {
  const unknown = t.scopes.filter((s) => !isScope(s));
  if (unknown.length) {
    throw new ApiError(
      "invalid_scope",
      `Unknown scope ${unknown.map((s) => JSON.stringify(s)).join(", ")}.`,
      {
        details: { invalid: unknown, scopes: [...allScopes] },
      },
    );
  }
  if (t.scopes.length === 0) throw validationFailed({ scopes: "ask for at least one scope" });
  const max = t.maxLedgerWindowDays || t.ledgerWindowDays;
  const problems: Record<string, string> = {};
  if (!Number.isInteger(t.ledgerWindowDays) || t.ledgerWindowDays < 1 || t.ledgerWindowDays > 365) {
    problems.ledgerWindowDays = "must be 1 to 365 days";
  }
  if (!Number.isInteger(max) || max < 1 || max > 365) problems.maxLedgerWindowDays = "must be 1 to 365 days";
  else if (max < t.ledgerWindowDays) problems.maxLedgerWindowDays = "must be at least ledgerWindowDays";
  if (Object.keys(problems).length) throw validationFailed(problems);
  // In the contract's order, once each.
  const ordered = allScopes.filter((s) => t.scopes.includes(s));
  return { scopes: ordered, ledgerWindowDays: t.ledgerWindowDays, maxLedgerWindowDays: max };
}

const COLUMNS = `id, partner_id, environment, user_id, status, scopes, ledger_window_days, max_ledger_window_days, source,
  granted_at, expires_at, revoked_at, revoked_by, superseded_by`;

/** What {@link createConsentService} returns. */
export type ConsentService = ReturnType<typeof createConsentService>;

/** Consent records (CONTRACT.md §4): grant, revoke, read, expire; every change raises its event. */
export function createConsentService({ clock, outbox }: { clock: Clock; outbox: Outbox }) {
  const revokedPayload = (c: ConsentRow) => ({
    consentId: c.id,
    userId: c.user_id,
    revokedBy: c.revoked_by,
    revokedAt: c.revoked_at?.toISOString(),
    status: c.status,
  });

  const ownedBy = async (em: Em, caller: Caller, id: string, lock = false): Promise<ConsentRow> => {
    const [row] = isId("cns", id)
      ? await sql<ConsentRow>(
          em,
          `select ${COLUMNS} from consents where id = $1 and partner_id = $2 and environment = $3 ${lock ? "for update" : ""}`,
          [id, caller.partnerId, caller.environment],
        )
      : [];
    // Another partner's or environment's consent is simply not found: ids do not leak.
    if (!row) throw new ApiError("not_found", `No consent ${id}.`);
    return row;
  };

  /** Ends an ACTIVE consent and raises `consent.revoked`; a consent already ended is returned as it is. */
  const end = async (
    tx: Em,
    row: ConsentRow,
    by: "USER" | "PARTNER" | "SYSTEM",
    status: "REVOKED" | "EXPIRED",
  ) => {
    if (row.status !== "ACTIVE") return row;
    const [ended] = await sql<ConsentRow>(
      tx,
      `update consents set status = $2, revoked_at = $3, revoked_by = $4 where id = $1 and status = 'ACTIVE' returning ${COLUMNS}`,
      [row.id, status, clock.now(), by],
    );
    if (!ended) return row;
    await outbox.raise(tx, {
      partnerId: ended.partner_id,
      environment: ended.environment,
      type: "consent.revoked",
      payload: revokedPayload(ended),
    });
    return ended;
  };

  return {
    /**
     * Writes a consent and raises `consent.granted`, in the caller's transaction if there is one. The
     * user's previous ACTIVE consent for the partner is superseded (REVOKED by SYSTEM, `supersededBy` set).
     */
    async grant(
      em: Em,
      input: GrantTerms & {
        partnerId: string;
        environment: Environment;
        userId: string;
        source: "DASHBOARD" | "CONSENT_LINK";
        expiresAt?: Date | undefined;
      },
    ): Promise<ConsentRow> {
      const terms = checkGrantTerms(input);
      const now = clock.now();
      const expiresAt = input.expiresAt ?? new Date(now.getTime() + DEFAULT_CONSENT_MS);
      if (expiresAt <= now) throw validationFailed({ expiresAt: "must be in the future" });
      return inTransaction(em, async (tx) => {
        const [user] = await sql<{ environment: Environment }>(
          tx,
          "select environment from users where id = $1",
          [input.userId],
        );
        if (!user || user.environment !== input.environment)
          throw new ApiError("not_found", `No user ${input.userId}.`);
        const partner = isId("ptn", input.partnerId)
          ? await sql(tx, "select 1 from partners where id = $1", [input.partnerId])
          : [];
        if (partner.length === 0) throw new ApiError("not_found", `No partner ${input.partnerId}.`);
        // Grants for one person, partner and environment take turns, so two at once cannot both see
        // "no active consent" and collide on the one-active index.
        await sql(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
          `consent:${input.partnerId}:${input.environment}:${input.userId}`,
        ]);
        const id = newId("cns");
        const superseded = await sql<{ id: string }>(
          tx,
          `update consents set status = 'REVOKED', revoked_at = $4, revoked_by = 'SYSTEM'
            where partner_id = $1 and environment = $2 and user_id = $3 and status = 'ACTIVE' returning id`,
          [input.partnerId, input.environment, input.userId, now],
        );
        const [row] = await sql<ConsentRow>(
          tx,
          `insert into consents (id, partner_id, environment, user_id, status, scopes, ledger_window_days,
                                 max_ledger_window_days, source, granted_at, expires_at)
           values ($1, $2, $3, $4, 'ACTIVE', $5, $6, $7, $8, $9, $10) returning ${COLUMNS}`,
          [
            id,
            input.partnerId,
            input.environment,
            input.userId,
            terms.scopes,
            terms.ledgerWindowDays,
            terms.maxLedgerWindowDays,
            input.source,
            now,
            expiresAt,
          ],
        );
        if (superseded.length) {
          await sql(tx, "update consents set superseded_by = $2 where id = any($1::text[])", [
            superseded.map((s) => s.id),
            id,
          ]);
        }
        const consent = row as ConsentRow;
        await outbox.raise(tx, {
          partnerId: input.partnerId,
          environment: input.environment,
          type: "consent.granted",
          payload: {
            consentId: consent.id,
            userId: consent.user_id,
            scopes: consent.scopes,
            ledgerWindowDays: consent.ledger_window_days,
            maxLedgerWindowDays: consent.max_ledger_window_days,
            source: consent.source,
            grantedAt: consent.granted_at.toISOString(),
            expiresAt: consent.expires_at.toISOString(),
            ...(superseded.length ? { supersedes: superseded.map((s) => s.id) } : {}),
          },
        });
        return consent;
      });
    },

    /** The partner ends one of its consents. */
    async revokeByPartner(em: Em, caller: Caller, id: string): Promise<ConsentRow> {
      return inTransaction(em, async (tx) =>
        end(tx, await ownedBy(tx, caller, id, true), "PARTNER", "REVOKED"),
      );
    },

    /** The person ends a consent from the dashboard. */
    async revokeByUser(em: Em, id: string): Promise<ConsentRow> {
      return em.transactional(async (tx) => {
        const [row] = isId("cns", id)
          ? await sql<ConsentRow>(tx, `select ${COLUMNS} from consents where id = $1 for update`, [id])
          : [];
        if (!row) throw new ApiError("not_found", `No consent ${id}.`);
        return end(tx, row, "USER", "REVOKED");
      });
    },

    async get(em: Em, caller: Caller, id: string): Promise<ConsentRow> {
      return ownedBy(em, caller, id);
    },

    /** The newest consent the user gave the caller, whatever its status. */
    async newestForUser(em: Em, caller: Caller, userId: string): Promise<ConsentRow> {
      const [row] = await sql<ConsentRow>(
        em,
        `select ${COLUMNS} from consents where partner_id = $1 and environment = $2 and user_id = $3
          order by granted_at desc, id desc limit 1`,
        [caller.partnerId, caller.environment, userId],
      );
      if (!row) throw new ApiError("not_found", `No consent from user ${userId}.`);
      return row;
    },

    /** Every consent of a user, newest first, with the partner's name (the dashboard's list). */
    async listForUser(em: Em, userId: string): Promise<(ConsentRow & { partner_name: string })[]> {
      return sql(
        em,
        `select ${COLUMNS.replace(/(\w+)/g, "c.$1")}, p.name as partner_name from consents c join partners p on p.id = c.partner_id
          where c.user_id = $1 order by c.granted_at desc, c.id desc`,
        [userId],
      );
    },

    /** Expires consents past `expiresAt`, each with `consent.revoked` (`revokedBy: SYSTEM`). */
    async expireDue(em: Em, limit = 500): Promise<number> {
      return em.transactional(async (tx) => {
        const due = await sql<ConsentRow>(
          tx,
          `select ${COLUMNS} from consents where status = 'ACTIVE' and expires_at <= $1
            order by expires_at limit $2 for update skip locked`,
          [clock.now(), limit],
        );
        for (const row of due) await end(tx, row, "SYSTEM", "EXPIRED");
        return due.length;
      });
    },
  };
}
