import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Environment } from "../platform/tenancy.ts";
import { personRepository as repo } from "./person.repository.ts";

/** How long an opened prompt session may take to answer its page. */
export const SESSION_ANSWER_MS = 15 * ms.minute;

/**
 * A prompt session for a person the platform has signed in (CONTRACT.md §4): a token for a URL that opens
 * once, before `expiresAt`, and then lets that person answer `subject` once.
 */
export async function createSession(
  clock: Clock,
  em: Em,
  input: { userId: string; environment: Environment; subject: string; ttlMs: number },
): Promise<{ token: string; expiresAt: Date }> {
  const now = clock.now();
  const token = randomBase62(32);
  const expiresAt = new Date(now.getTime() + input.ttlMs);
  await inTransaction(em, (tx) =>
    repo.insertSession(tx, {
      id: newId("pss"),
      environment: input.environment,
      tokenHash: sha256(token),
      userId: input.userId,
      subject: input.subject,
      createdAt: now,
      expiresAt,
      openedAt: null,
      usedAt: null,
    }),
  );
  return { token, expiresAt };
}

/**
 * Opens a prompt session's URL, once, before it expires: answers what it is for. Anything else is
 * `not_found` (a used or expired URL says no more than an unknown one).
 */
export function openSession(
  clock: Clock,
  em: Em,
  token: string,
): Promise<{ id: string; subject: string; userId: string }> {
  return inTransaction(em, async (tx) => {
    const row = /^[0-9A-Za-z]{32}$/.test(token) ? await repo.sessionByToken(tx, sha256(token)) : null;
    const now = clock.now();
    if (!row || row.openedAt || row.expiresAt <= now)
      throw new ApiError("not_found", "This sign-in link has expired or was already used.");
    row.openedAt = now;
    await repo.save(tx);
    return { id: row.id, subject: row.subject, userId: row.userId };
  });
}

/**
 * The signed-in person behind an opened session, if it may still answer `subject` (opened less than
 * {@link SESSION_ANSWER_MS} ago, not used). With `use`, it is used up in `tx`.
 */
export async function sessionUser(
  clock: Clock,
  tx: Em,
  sessionId: string,
  subject: string,
  use: boolean,
): Promise<string | undefined> {
  const row = await repo.session(tx, sessionId, use || tx.isInTransaction());
  const now = clock.now();
  if (!row?.openedAt || row.usedAt || row.subject !== subject) return undefined;
  if (now.getTime() - row.openedAt.getTime() > SESSION_ANSWER_MS) return undefined;
  if (use) {
    row.usedAt = now;
    await repo.save(tx);
  }
  return row.userId;
}
