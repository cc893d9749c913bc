import { ms } from "../platform/clock.ts";
import { sql } from "../platform/db/sql.ts";
import type { PurgeBatch, PurgeStep } from "../retention/retention.service.ts";
import { SESSION_IDLE_MS } from "./session.service.ts";

/**
 * Portal sessions that are over: ended, idle past 30 minutes, or past their 12 hours. Nothing is kept of a
 * session after it ends (the audit log has the sign-in and the sign-out). The cut-off is the run's now.
 */
export const portalSessionsPurge: PurgeStep = {
  name: "portal sessions",
  retention: "now",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const idle = new Date(cutoff.getTime() - SESSION_IDLE_MS);
    const rows = await sql<{ id: string }>(
      tx,
      `delete from portal_sessions where id in (
         select id from portal_sessions where ended_at < $1 or expires_at < $1 or last_seen_at < $2
          limit $3 for update skip locked)
       returning id`,
      [cutoff, idle, limit],
    );
    return { picked: rows.length, deleted: { portal_sessions: rows.length } };
  },
};

/** Invites used or expired before the cut-off (RETENTION_DAYS, 30 by default): a used one expired too. */
export const portalInvitesPurge: PurgeStep = {
  name: "portal invites",
  retention: "default",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const rows = await sql<{ id: string }>(
      tx,
      `delete from portal_invites where id in (
         select id from portal_invites where expires_at < $1 limit $2 for update skip locked)
       returning id`,
      [cutoff, limit],
    );
    return { picked: rows.length, deleted: { portal_invites: rows.length } };
  },
};

/** Audit events older than PORTAL_AUDIT_RETENTION_DAYS (a year by default). */
export const portalAuditPurge: PurgeStep = {
  name: "portal audit events",
  retention: "audit",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const rows = await sql<{ id: string }>(
      tx,
      `delete from portal_audit_events where id in (
         select id from portal_audit_events where created_at < $1 limit $2 for update skip locked)
       returning id`,
      [cutoff, limit],
    );
    return { picked: rows.length, deleted: { portal_audit_events: rows.length } };
  },
};

/** Sign-in throttles of accounts that have not failed for a day and are not locked. */
export const portalThrottlesPurge: PurgeStep = {
  name: "portal sign-in throttles",
  retention: "now",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const rows = await sql<{ email_hash: Buffer }>(
      tx,
      `delete from portal_signin_throttles where email_hash in (
         select email_hash from portal_signin_throttles
          where updated_at < $1 and (locked_until is null or locked_until < $2)
          limit $3 for update skip locked)
       returning email_hash`,
      [new Date(cutoff.getTime() - ms.day), cutoff, limit],
    );
    return { picked: rows.length, deleted: { portal_signin_throttles: rows.length } };
  },
};

/** The portal's purge steps, in the order they run. */
export const portalPurges = [portalSessionsPurge, portalInvitesPurge, portalAuditPurge, portalThrottlesPurge];
