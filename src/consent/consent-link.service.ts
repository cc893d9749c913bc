import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction, sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import type { Caller, Environment } from "../platform/tenancy.ts";
import type { UserService } from "../users/user.service.ts";
import { type ConsentService, checkGrantTerms, type GrantTerms } from "./consent.service.ts";
import { isE164, last4 } from "./phone.ts";

/** Binds a sealed link token to its link. */
export const linkTokenAad = (linkId: string) => `consent-link:${linkId}`;

/** A link as stored (status EXPIRED is derived from `expires_at`). */
export interface LinkRow {
  id: string;
  partner_id: string;
  environment: Environment;
  token_enc: Buffer;
  phone_hash: Buffer;
  phone_last4: string;
  scopes: string[];
  ledger_window_days: number;
  max_ledger_window_days: number;
  redirect_url: string | null;
  status: "PENDING" | "ACCEPTED" | "DECLINED";
  consent_id: string | null;
  expires_at: Date;
  decided_at: Date | null;
  created_at: Date;
}

/** A link as partners and the page see it. */
export interface LinkView extends Omit<LinkRow, "status" | "token_enc" | "phone_hash"> {
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

const COLUMNS = `id, partner_id, environment, token_enc, phone_hash, phone_last4, scopes, ledger_window_days,
  max_ledger_window_days, redirect_url, status, consent_id, expires_at, decided_at, created_at`;
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
  const view = (row: LinkRow): LinkView => {
    const { token_enc, phone_hash: _hash, ...rest } = row;
    const token = o.box.open(token_enc, linkTokenAad(row.id)).toString("utf8");
    const expired = row.status === "PENDING" && row.expires_at <= o.clock.now();
    return { ...rest, status: expired ? "EXPIRED" : row.status, url: `${o.publicUrl()}/consent/${token}` };
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

  const byToken = async (em: Em, token: string, lock: boolean): Promise<LinkRow> => {
    const [row] = TOKEN.test(token)
      ? await sql<LinkRow>(
          em,
          `select ${COLUMNS} from consent_links where token_hash = $1 ${lock ? "for update" : ""}`,
          [sha256(token)],
        )
      : [];
    if (!row) throw new ApiError("not_found", "No such consent link.");
    return row;
  };

  /** Decides a link locked for update: only a PENDING, unexpired link can be decided, once. */
  const decideRow = async (tx: Em, row: LinkRow, accept: boolean): Promise<Decision> => {
    const current = view(row);
    if (current.status !== "PENDING")
      throw new ApiError("consent_link_gone", undefined, { details: { status: current.status } });
    const now = o.clock.now();
    if (!accept) {
      const [updated] = await sql<LinkRow>(
        tx,
        `update consent_links set status = 'DECLINED', decided_at = $2 where id = $1 returning ${COLUMNS}`,
        [row.id, now],
      );
      return { outcome: "declined", link: view(updated as LinkRow) };
    }
    const userId = await o.users.byPhone(tx, row.environment, row.phone_hash);
    if (!userId) return { outcome: "no_account", link: current };
    const consent = await o.consents.grant(tx, {
      partnerId: row.partner_id,
      environment: row.environment,
      userId,
      scopes: row.scopes,
      ledgerWindowDays: row.ledger_window_days,
      maxLedgerWindowDays: row.max_ledger_window_days,
      source: "CONSENT_LINK",
    });
    const [updated] = await sql<LinkRow>(
      tx,
      `update consent_links set status = 'ACCEPTED', decided_at = $2, consent_id = $3 where id = $1 returning ${COLUMNS}`,
      [row.id, now, consent.id],
    );
    return { outcome: "accepted", link: view(updated as LinkRow), consentId: consent.id };
  };

  return {
    async create(
      em: Em,
      caller: Caller,
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
        const [row] = await sql<LinkRow>(
          tx,
          `insert into consent_links (id, partner_id, environment, token_hash, token_enc, phone_hash, phone_last4, scopes,
                                      ledger_window_days, max_ledger_window_days, redirect_url, status, expires_at, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'PENDING', $12, $13) returning ${COLUMNS}`,
          [
            id,
            caller.partnerId,
            caller.environment,
            sha256(token),
            o.box.seal(Buffer.from(token), linkTokenAad(id)),
            o.users.phoneHash(input.phoneNumber),
            last4(input.phoneNumber),
            terms.scopes,
            terms.ledgerWindowDays,
            terms.maxLedgerWindowDays,
            redirect,
            new Date(now.getTime() + hours * ms.hour),
            now,
          ],
        );
        return view(row as LinkRow);
      });
    },

    async get(em: Em, caller: Caller, id: string): Promise<LinkView> {
      const [row] = isId("cnl", id)
        ? await sql<LinkRow>(
            em,
            `select ${COLUMNS} from consent_links where id = $1 and partner_id = $2 and environment = $3`,
            [id, caller.partnerId, caller.environment],
          )
        : [];
      if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
      return view(row);
    },

    /** What the page shows for a token, used or not. */
    async page(em: Em, token: string): Promise<PageView> {
      const row = await byToken(em, token, false);
      const [partner] = await sql<{ name: string }>(em, "select name from partners where id = $1", [
        row.partner_id,
      ]);
      return { link: view(row), partnerName: partner?.name ?? "" };
    },

    /**
     * The person's decision. Only a PENDING, unexpired link can be decided, once: anything else is
     * `consent_link_gone`. Accepting writes the consent (and its event) in the same transaction.
     */
    async decide(em: Em, token: string, accept: boolean): Promise<Decision> {
      return em.transactional(async (tx) => decideRow(tx, await byToken(tx, token, true), accept));
    },

    /** The person's decision on a link of the caller's, by id (the sandbox helpers act for the person). */
    async decideById(em: Em, caller: Caller, id: string, accept: boolean): Promise<Decision> {
      return em.transactional(async (tx) => {
        const [row] = isId("cnl", id)
          ? await sql<LinkRow>(
              tx,
              `select ${COLUMNS} from consent_links where id = $1 and partner_id = $2 and environment = $3 for update`,
              [id, caller.partnerId, caller.environment],
            )
          : [];
        if (!row) throw new ApiError("not_found", `No consent link ${id}.`);
        return decideRow(tx, row, accept);
      });
    },
  };
}
