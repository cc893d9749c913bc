import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { newId } from "../platform/ids.ts";
import type { PortalMemberRow } from "./member.entity.ts";
import type { Role } from "./roles.ts";
import { PortalSessionEntity } from "./session.entity.ts";
import { sessionRepository } from "./session.repository.ts";

/** What other features read of a portal session: the member behind a call, and the environment header. */
export { type PortalMember, portalMemberOf } from "./portal.context.ts";
export { ENVIRONMENT_HEADER } from "./portal.gate.ts";

/** Sessions end after 30 minutes without a call, and 12 hours after sign-in in any case (docs/portal.md). */
export const SESSION_IDLE_MS = 30 * ms.minute;
/** See {@link SESSION_IDLE_MS}. */
export const SESSION_ABSOLUTE_MS = 12 * ms.hour;
/** `last_seen_at` is written at most this often: one write a minute per session, not one per call. */
const TOUCH_MS = ms.minute;
const TOKEN = /^[0-9A-Za-z]{43}$/;

/** A live session and the member it is, as the edge needs them. */
export interface LiveSession {
  id: string;
  memberId: string;
  partnerId: string;
  partnerName: string;
  email: string;
  role: Role;
  expiresAt: Date;
}

/** What {@link createSessionService} returns. */
export type SessionService = ReturnType<typeof createSessionService>;

/** Portal sessions: a random token in a cookie, only its SHA-256 in PostgreSQL. */
export function createSessionService({ clock }: { clock: Clock }) {
  return {
    /** Starts a session for `member`; the token is returned here only. */
    async start(em: Em, member: Pick<PortalMemberRow, "id" | "partnerId">) {
      const token = randomBase62(43);
      const now = clock.now();
      const row = {
        id: newId("ses"),
        tokenHash: sha256(token),
        memberId: member.id,
        partnerId: member.partnerId,
        createdAt: now,
        lastSeenAt: now,
        expiresAt: new Date(now.getTime() + SESSION_ABSOLUTE_MS),
        endedAt: null,
      };
      em.persist(em.create(PortalSessionEntity, row));
      await em.flush();
      return { token, expiresAt: row.expiresAt };
    },

    /**
     * The live session a cookie's token names, with its member (one query), or undefined: unknown, ended,
     * idle past 30 minutes, past 12 hours, or its member removed. Refreshes `last_seen_at` once a minute.
     */
    async resolve(em: Em, token: string): Promise<LiveSession | undefined> {
      if (!TOKEN.test(token)) return undefined;
      const now = clock.now();
      const row = await sessionRepository.findLive(
        em,
        sha256(token),
        now,
        new Date(now.getTime() - SESSION_IDLE_MS),
      );
      if (!row) return undefined;
      if (now.getTime() - row.lastSeenAt.getTime() >= TOUCH_MS)
        await sessionRepository.touch(em, row.id, now);
      const { lastSeenAt: _, ...live } = row;
      return live;
    },

    /** Ends one session. */
    async end(em: Em, sessionId: string): Promise<void> {
      await sessionRepository.end(em, sessionId, clock.now());
    },

    /** Ends every session of a member; returns how many were live. */
    async endAll(em: Em, memberId: string): Promise<number> {
      return sessionRepository.endAll(em, memberId, clock.now());
    },
  };
}
