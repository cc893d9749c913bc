import { randomInt } from "node:crypto";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { keyedHash } from "../platform/crypto/keys.ts";
import { constantTimeEqual } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Logger } from "../platform/logger.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { UserService } from "../users/user.service.ts";
import { personRepository as repo } from "./person.repository.ts";
import { createSession, openSession, SESSION_ANSWER_MS, sessionUser } from "./prompt-sessions.ts";
import type { SmsSender } from "./sms.ts";

export { SESSION_ANSWER_MS };

/** The one-time code of the sandbox, where no text is sent (CONTRACT.md §7; documented in docs/consent.md). */
export const SANDBOX_CODE = "000000";

/** How long a code works. */
export const CODE_TTL_MS = 10 * ms.minute;
/** Codes a page may send per hour. */
export const SENDS_PER_SUBJECT_PER_HOUR = 3;
/** Codes one phone number may be sent per hour, across every page of one partner (who cannot flood a person). */
export const SENDS_PER_PHONE_PER_HOUR = 5;
/** Wrong codes that lock a page for good. */
export const TRIES_PER_SUBJECT = 5;
/** Wrong codes, across every page of one partner for one phone, that stop its codes for a day. */
export const TRIES_PER_PHONE_PER_DAY = 10;
/** How long codes are kept (the per-phone limits look back a day). */
export const CODE_RETENTION_MS = ms.day;

/** What a code is for: a hosted page's subject (a consent link) and the phone the page is for. */
export interface CodeSubject {
  id: string;
  /** Whose page it is (a partner): per-phone limits count per owner. */
  owner: string;
  environment: Environment;
  phoneHash: Buffer;
}

/** The answer to a code. */
export type CodeCheck = "ok" | "wrong" | "expired" | "none" | "locked";

/** What {@link createPersonService} returns. */
export type PersonService = ReturnType<typeof createPersonService>;

/** What {@link createPersonService} needs. */
export interface PersonServiceOptions {
  clock: Clock;
  /** The `person-code` data key. */
  codeKey: Buffer;
  users: UserService;
  /** Production's SMS provider; unset, production pages cannot send codes (links are refused). */
  sms: SmsSender | undefined;
  logger: Logger;
}

const hashOf = (o: PersonServiceOptions, id: string, code: string) => keyedHash(o.codeKey, `${id}:${code}`);

/** Sends a text in the background: the page answers at once, the same whether or not a text goes out. */
function deliver(o: PersonServiceOptions, subjectId: string, to: string, text: string) {
  const sms = o.sms;
  if (!sms) return;
  // Caught here: a provider failure is logged (never the code or the number) and the person can ask again.
  sms
    .send(to, text)
    .catch((err: unknown) =>
      o.logger.warn("one-time code not sent", { subject: subjectId, err: (err as Error).message }),
    );
}

/**
 * Stores a new code for the subject, in `tx`, within the limits (see {@link sendCode}); answers the phone
 * number to text it to, when the phone has an account outside the sandbox.
 */
async function recordCode(
  o: PersonServiceOptions,
  tx: Em,
  subject: CodeSubject,
  code: string,
  now: Date,
  expiresAt: Date,
): Promise<{ phoneNumber: string } | undefined> {
  await repo.lockSubject(tx, subject.id, subject.owner, subject.phoneHash);
  const hourAgo = new Date(now.getTime() - ms.hour);
  const dayAgo = new Date(now.getTime() - ms.day);
  const c = await repo.counts(tx, subject.id, subject.owner, subject.phoneHash, hourAgo, dayAgo);
  if (c.subjectFailures >= TRIES_PER_SUBJECT) throw new ApiError("consent_link_gone");
  if (c.phoneFailures >= TRIES_PER_PHONE_PER_DAY)
    throw new ApiError("rate_limited", "Too many wrong codes; try again tomorrow.", {
      retryAfterSeconds: 86_400,
    });
  if (c.subjectSends >= SENDS_PER_SUBJECT_PER_HOUR || c.phoneSends >= SENDS_PER_PHONE_PER_HOUR) {
    const oldest = await repo.oldestSince(tx, subject.id, subject.owner, subject.phoneHash, hourAgo);
    const wait = oldest ? oldest.getTime() + ms.hour - now.getTime() : ms.hour;
    throw new ApiError("rate_limited", "Too many codes were sent; try again later.", {
      retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)),
    });
  }
  const id = newId("otp");
  await repo.insert(tx, {
    id,
    environment: subject.environment,
    subject: subject.id,
    owner: subject.owner,
    phoneHash: subject.phoneHash,
    codeHash: hashOf(o, id, code),
    attempts: 0,
    createdAt: now,
    expiresAt,
    usedAt: null,
  });
  // One indexed read whether or not the phone has an account: the answer takes the same time.
  return subject.environment === "sandbox"
    ? undefined
    : await o.users.phoneOf(tx, subject.environment, subject.phoneHash);
}

/**
 * Makes a new code for the subject and sends it; earlier codes of the subject stop working. Refuses with
 * `rate_limited` (and `Retry-After`) past 3 codes per page or 5 per phone in an hour, and with
 * `consent_link_gone` once the page is locked by wrong codes.
 */
async function sendCode(
  o: PersonServiceOptions,
  em: Em,
  subject: CodeSubject,
  text: (code: string) => string,
): Promise<{ expiresAt: Date }> {
  const now = o.clock.now();
  const code =
    subject.environment === "sandbox" ? SANDBOX_CODE : String(randomInt(0, 1_000_000)).padStart(6, "0");
  const expiresAt = new Date(now.getTime() + CODE_TTL_MS);
  const person = await inTransaction(em, (tx) => recordCode(o, tx, subject, code, now, expiresAt));
  if (person) deliver(o, subject.id, person.phoneNumber, text(code));
  return { expiresAt };
}

/**
 * Checks a code against the subject's newest one, in `tx`: a right one is used up, a wrong one counted.
 * The caller commits `tx` whatever the answer (a wrong try must stay counted) and acts only on `ok`.
 * With `mayPass` false (a phone with no account) no code is right, and the answer is as for a wrong one.
 * Past the phone's daily cap of wrong codes, `rate_limited` (nothing counted, the page not locked).
 */
async function checkCode(
  o: PersonServiceOptions,
  tx: Em,
  subject: CodeSubject,
  code: string,
  mayPass: boolean,
): Promise<CodeCheck> {
  const now = o.clock.now();
  await repo.lockSubject(tx, subject.id, subject.owner, subject.phoneHash);
  const dayAgo = new Date(now.getTime() - ms.day);
  const c = await repo.counts(tx, subject.id, subject.owner, subject.phoneHash, now, dayAgo);
  if (c.subjectFailures >= TRIES_PER_SUBJECT) return "locked";
  // The phone's daily cap is a limit, not this page's failure: the page stays open for tomorrow.
  if (c.phoneFailures >= TRIES_PER_PHONE_PER_DAY)
    throw new ApiError("rate_limited", "Too many wrong codes; try again tomorrow.", {
      retryAfterSeconds: 86_400,
    });
  const newest = await repo.newest(tx, subject.id);
  if (!newest) return "none";
  if (newest.usedAt || newest.expiresAt <= now) return "expired";
  const given = /^\d{6}$/.test(code) ? code : "";
  const right = given !== "" && constantTimeEqual(hashOf(o, newest.id, given), newest.codeHash);
  if (right && mayPass) {
    newest.usedAt = now;
    await repo.save(tx);
    return "ok";
  }
  newest.attempts += 1;
  await repo.save(tx);
  return c.subjectFailures + 1 >= TRIES_PER_SUBJECT ? "locked" : "wrong";
}

/**
 * The person proves they hold the phone (CONTRACT.md §4): a 6-digit code the service makes and sends by SMS
 * to the number the platform holds for the user, never one a partner typed. Only a keyed hash of a code is
 * stored; a code works once, for 10 minutes. A page for a phone with no account behaves exactly the same (a
 * code is made and counted) but nothing is sent, so the page is no account oracle. A person the platform has
 * signed in may instead answer through a prompt session.
 */
export function createPersonService(o: PersonServiceOptions) {
  return {
    /** True when codes can reach people in this environment (production needs an SMS provider). */
    canSend(environment: Environment): boolean {
      return environment === "sandbox" || o.sms !== undefined;
    },

    /** See {@link sendCode}. */
    send: (em: Em, subject: CodeSubject, text: (code: string) => string) => sendCode(o, em, subject, text),

    /** See {@link checkCode}. */
    check: (tx: Em, subject: CodeSubject, code: string, mayPass = true) =>
      checkCode(o, tx, subject, code, mayPass),

    /** Wrong codes left on a subject before it locks. */
    async triesLeft(em: Em, subject: CodeSubject): Promise<number> {
      const now = o.clock.now();
      const c = await repo.counts(em, subject.id, subject.owner, subject.phoneHash, now, now);
      return Math.max(0, TRIES_PER_SUBJECT - c.subjectFailures);
    },

    /** See {@link createSession}. */
    createSession: (
      em: Em,
      input: { userId: string; environment: Environment; subject: string; ttlMs: number },
    ) => createSession(o.clock, em, input),

    /** See {@link openSession}. */
    openSession: (em: Em, token: string) => openSession(o.clock, em, token),

    /** See {@link sessionUser}. */
    sessionUser: (tx: Em, sessionId: string, subject: string, use: boolean) =>
      sessionUser(o.clock, tx, sessionId, subject, use),

    /** Deletes codes and prompt sessions past their day. */
    purge(em: Em, batch = 1_000): Promise<number> {
      return repo.purge(em, new Date(o.clock.now().getTime() - CODE_RETENTION_MS), batch);
    },
  };
}
