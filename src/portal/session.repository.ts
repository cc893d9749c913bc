import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Role } from "./roles.ts";

/** A live session joined to its member and partner. */
export interface SessionRow {
  id: string;
  memberId: string;
  partnerId: string;
  partnerName: string;
  email: string;
  role: Role;
  lastSeenAt: Date;
  expiresAt: Date;
}

/**
 * Portal sessions' set-based statements. A session is found by its token's hash before anyone is known, so
 * these name no tenant: the row found says whose it is (as an API key's hash does).
 */
export const sessionRepository = {
  /** The live session with this token hash, with its member (not removed) and partner, in one query. */
  async findLive(em: Em, tokenHash: Buffer, now: Date, idleSince: Date): Promise<SessionRow | undefined> {
    // Timestamps keep their `_at` names: the sql helper reads those as Dates.
    const [row] = await sql<
      Omit<SessionRow, "lastSeenAt" | "expiresAt"> & { last_seen_at: Date; expires_at: Date }
    >(
      em,
      `select s.id, s.member_id as "memberId", s.partner_id as "partnerId", p.name as "partnerName", m.email,
              m.role, s.last_seen_at, s.expires_at
         from portal_sessions s
         join portal_members m on m.id = s.member_id and m.removed_at is null
         join partners p on p.id = s.partner_id
        where s.token_hash = $1 and s.ended_at is null and s.expires_at > $2 and s.last_seen_at > $3`,
      [tokenHash, now, idleSince],
    );
    if (!row) return undefined;
    const { last_seen_at, expires_at, ...rest } = row;
    return { ...rest, lastSeenAt: last_seen_at, expiresAt: expires_at };
  },

  /** Records that a session was used now. */
  async touch(em: Em, id: string, now: Date): Promise<void> {
    await sql(em, "update portal_sessions set last_seen_at = $2 where id = $1", [id, now]);
  },

  /** Ends one session. */
  async end(em: Em, id: string, now: Date): Promise<void> {
    await sql(em, "update portal_sessions set ended_at = $2 where id = $1 and ended_at is null", [id, now]);
  },

  /** Ends every live session of a member; returns how many there were. */
  async endAll(em: Em, memberId: string, now: Date): Promise<number> {
    const rows = await sql<{ id: string }>(
      em,
      "update portal_sessions set ended_at = $2 where member_id = $1 and ended_at is null returning id",
      [memberId, now],
    );
    return rows.length;
  },
};
