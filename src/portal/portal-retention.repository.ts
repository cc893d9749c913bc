import { ms } from "../platform/clock.ts";
import { deleteCounted } from "../platform/db/purge.ts";
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
    const deleted = await deleteCounted(
      tx,
      `delete from portal_sessions where id in (
         select id from portal_sessions where ended_at < $1 or expires_at < $1 or last_seen_at < $2
          limit $3 for update skip locked)
       returning 1`,
      [cutoff, idle, limit],
    );
    return { picked: deleted, deleted: { portal_sessions: deleted } };
  },
};

/** Invites used or expired before the cut-off (RETENTION_DAYS, 30 by default): a used one expired too. */
export const portalInvitesPurge: PurgeStep = {
  name: "portal invites",
  retention: "default",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const deleted = await deleteCounted(
      tx,
      `delete from portal_invites where id in (
         select id from portal_invites where expires_at < $1 limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    return { picked: deleted, deleted: { portal_invites: deleted } };
  },
};

/** Audit events older than PORTAL_AUDIT_RETENTION_DAYS (a year by default). */
export const portalAuditPurge: PurgeStep = {
  name: "portal audit events",
  retention: "audit",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const deleted = await deleteCounted(
      tx,
      `delete from portal_audit_events where id in (
         select id from portal_audit_events where created_at < $1 limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    return { picked: deleted, deleted: { portal_audit_events: deleted } };
  },
};

/** Sign-in throttles of accounts that have not failed for a day and are not locked. */
export const portalThrottlesPurge: PurgeStep = {
  name: "portal sign-in throttles",
  retention: "now",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const deleted = await deleteCounted(
      tx,
      `delete from portal_signin_throttles where email_hash in (
         select email_hash from portal_signin_throttles
          where updated_at < $1 and (locked_until is null or locked_until < $2)
          limit $3 for update skip locked)
       returning 1`,
      [new Date(cutoff.getTime() - ms.day), cutoff, limit],
    );
    return { picked: deleted, deleted: { portal_signin_throttles: deleted } };
  },
};

/** The portal's purge steps, in the order they run. */
export const portalPurges = [portalSessionsPurge, portalInvitesPurge, portalAuditPurge, portalThrottlesPurge];
