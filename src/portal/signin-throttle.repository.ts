import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";

/**
 * The per-account sign-in throttle, kept per email digest whether or not the email is a member's (so a
 * lock-out says nothing of which emails exist): before anyone is known, so no tenant is named.
 */
export const signinThrottleRepository = {
  /** Until when this email is locked, if it is. */
  async lockedUntil(em: Em, emailHash: Buffer): Promise<Date | undefined> {
    // Aliased `_at`: the sql helper reads those columns as Dates.
    const [row] = await sql<{ locked_at: Date | null }>(
      em,
      "select locked_until as locked_at from portal_signin_throttles where email_hash = $1",
      [emailHash],
    );
    return row?.locked_at ?? undefined;
  },

  /** Counts one more failure; returns the count. */
  async fail(em: Em, emailHash: Buffer, now: Date): Promise<number> {
    const [row] = await sql<{ failures: number }>(
      em,
      `insert into portal_signin_throttles (email_hash, failures, locked_until, updated_at) values ($1, 1, null, $2)
       on conflict (email_hash) do update set failures = portal_signin_throttles.failures + 1, updated_at = $2
       returning failures`,
      [emailHash, now],
    );
    return row?.failures ?? 1;
  },

  /** Locks the email until `until`. */
  async lock(em: Em, emailHash: Buffer, until: Date): Promise<void> {
    await sql(em, "update portal_signin_throttles set locked_until = $2 where email_hash = $1", [
      emailHash,
      until,
    ]);
  },

  /** Forgets the failures (a successful sign-in). */
  async clear(em: Em, emailHash: Buffer): Promise<void> {
    await sql(em, "delete from portal_signin_throttles where email_hash = $1", [emailHash]);
  },
};
