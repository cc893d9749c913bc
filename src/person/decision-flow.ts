import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, type ErrorCode, isApiError, validationFailed } from "../platform/errors.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { HostedOutcome, PageProof } from "./hosted-flow.ts";
import type { CodeSubject, PersonService } from "./person.service.ts";

/** How the person proved who they are, when, from where, and the exact terms they saw. */
export interface DecisionEvidence {
  method: "OTP_SMS" | "PLATFORM_SESSION";
  at: Date;
  ip?: string | undefined;
  userAgent?: string | undefined;
  terms: string;
}

/**
 * What one kind of hosted decision supplies (a consent link, a repayment mandate): its subject, found by the
 * page's token, and what differs between them: who it is for, how a lock-out and a decision are recorded
 * (and the events that raises). The steps around them are {@link createDecisionFlow}'s, the same for all.
 */
export interface DecisionSubject<Row> {
  /** The 410 code of a subject that can no longer be answered. */
  goneCode: ErrorCode;
  /** The subject of a page's token, locked for update when asked; `not_found` when there is none. */
  byToken(em: Em, token: string, lock: boolean): Promise<Row>;
  id(row: Row): string;
  partnerId(row: Row): string;
  /** Undefined while the subject may still be answered; else the status its 410 reports. */
  closedAs(row: Row): string | undefined;
  /** Whom the codes go to, and whose limits they count against. */
  codeSubject(em: Em, row: Row): Promise<CodeSubject>;
  /** The text message that carries a code, in the partner's name. */
  codeMessage(code: string, partnerName: string): string;
  /** The user the subject is for, if they have an account: only they may answer it. */
  holder(em: Em, row: Row): Promise<string | undefined>;
  /** Records that wrong codes locked the subject for good (in the transaction that counted the last one). */
  lockOut(tx: Em, row: Row): Promise<void>;
  /** Records the decision of a person who proved who they are, on the subject locked for update. */
  record(tx: Em, row: Row, accept: boolean, evidence: DecisionEvidence): Promise<HostedOutcome>;
  /** The subject a prompt session is asked for, by id, for this user; `not_found` when it is not theirs. */
  forPrompt(em: Em, userId: string, id: string): Promise<{ row: Row; environment: Environment }>;
}

/** What the steps of every flow need. */
export interface DecisionFlowDeps {
  clock: Clock;
  person: PersonService;
  partners: { names(em: Em, partnerIds: string[]): Promise<Map<string, string>> };
  /** Base URL of the hosted pages (PUBLIC_URL, or the partner listener). */
  publicUrl: () => string;
}

interface Flow<Row> {
  o: DecisionFlowDeps;
  s: DecisionSubject<Row>;
}

/** Only a subject still open can be answered, once: anything else is its 410, with the status it ended in. */
function assertOpen<Row>(s: DecisionSubject<Row>, row: Row): void {
  const status = s.closedAs(row);
  if (status !== undefined) throw new ApiError(s.goneCode, undefined, { details: { status } });
}

/**
 * Texts the person a one-time code for the page (to the number the platform holds; for a phone with no
 * account nothing is sent, and the page cannot tell). The 410 once the subject is answered, lapsed or locked;
 * `rate_limited` past the send limits.
 */
async function sendCode<Row>({ o, s }: Flow<Row>, em: Em, token: string): Promise<{ expiresAt: Date }> {
  const row = await s.byToken(em, token, false);
  assertOpen(s, row);
  const names = await o.partners.names(em, [s.partnerId(row)]);
  const partner = names.get(s.partnerId(row)) ?? "A lender";
  try {
    return await o.person.send(em, await s.codeSubject(em, row), (code) => s.codeMessage(code, partner));
  } catch (err) {
    // The code service says a page locked by wrong codes is gone in the consent link's words.
    if (isApiError(err) && err.code === "consent_link_gone" && s.goneCode !== err.code)
      throw new ApiError(s.goneCode);
    throw err;
  }
}

/**
 * The person's decision on the page, with the code they were sent. A wrong code is counted and committed
 * (five lock the subject for good); only a right one decides, in the same transaction.
 */
async function decide<Row>(f: Flow<Row>, em: Em, token: string, accept: boolean, proof: PageProof) {
  const { o, s } = f;
  return em.transactional(async (tx): Promise<HostedOutcome> => {
    const row = await s.byToken(tx, token, true);
    assertOpen(s, row);
    // A phone with no account never gets a code (in the sandbox, where the code is fixed, no code is right
    // for it either): the page answers exactly as for a wrong code, so it is no account oracle.
    const holder = await s.holder(tx, row);
    const subject = await s.codeSubject(tx, row);
    const check = await o.person.check(tx, subject, proof.code, holder !== undefined);
    if (check === "locked") {
      await s.lockOut(tx, row);
      return { outcome: "locked" };
    }
    if (check === "expired" || check === "none") return { outcome: "code_expired" };
    if (check === "wrong") return { outcome: "wrong_code", triesLeft: await o.person.triesLeft(tx, subject) };
    const { ip, userAgent, terms } = proof;
    return s.record(tx, row, accept, { method: "OTP_SMS", at: o.clock.now(), ip, userAgent, terms });
  });
}

/** True when the opened prompt session may still answer this page's subject. */
async function sessionFits<Row>({ o, s }: Flow<Row>, em: Em, token: string, sessionId: string) {
  const row = await s.byToken(em, token, false);
  return (await o.person.sessionUser(em, sessionId, s.id(row), false)) !== undefined;
}

/**
 * The signed-in person's decision through a prompt session: only for a subject that is that person's own (a
 * session for one user never answers another's); the session is then used up. The subject is locked first,
 * so of two sessions answering at once the second finds it decided: its 410.
 */
async function decideWithSession<Row>(
  { o, s }: Flow<Row>,
  em: Em,
  token: string,
  accept: boolean,
  sessionId: string,
  proof: Omit<PageProof, "code">,
) {
  return em.transactional(async (tx): Promise<HostedOutcome> => {
    const row = await s.byToken(tx, token, true);
    assertOpen(s, row);
    const sessionUser = await o.person.sessionUser(tx, sessionId, s.id(row), false);
    const holder = await s.holder(tx, row);
    if (!sessionUser || sessionUser !== holder) return { outcome: "not_this_person" };
    await o.person.sessionUser(tx, sessionId, s.id(row), true);
    const { ip, userAgent, terms } = proof;
    return s.record(tx, row, accept, { method: "PLATFORM_SESSION", at: o.clock.now(), ip, userAgent, terms });
  });
}

/**
 * The dashboard's prompt: a URL that opens the subject's page for the signed-in user, once, within
 * `ttlSeconds` (30 to 900). Only a subject of that user's, still open.
 */
async function createPrompt<Row>(
  { o, s }: Flow<Row>,
  em: Em,
  userId: string,
  id: string,
  ttlSeconds: number,
): Promise<{ url: string; expiresAt: Date }> {
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 30 || ttlSeconds > 900)
    throw validationFailed({ expiresInSeconds: "must be 30 to 900" });
  const { row, environment } = await s.forPrompt(em, userId, id);
  assertOpen(s, row);
  const { token, expiresAt } = await o.person.createSession(em, {
    userId,
    environment,
    subject: s.id(row),
    ttlMs: ttlSeconds * 1000,
  });
  return { url: `${o.publicUrl()}/prompt/${token}`, expiresAt };
}

/** What {@link createDecisionFlow} returns. */
export type DecisionFlow<Row> = ReturnType<typeof createDecisionFlow<Row>>;

/**
 * The decision a hosted page asks of a person, the same for every kind of subject: open by the page's token;
 * the person proves who they are (a code texted to the platform's number for them, or the platform's prompt
 * session); they accept or decline, once; the subject is gone (410) once decided, lapsed or locked.
 */
export function createDecisionFlow<Row>(o: DecisionFlowDeps, subject: DecisionSubject<Row>) {
  const f: Flow<Row> = { o, s: subject };
  return {
    /** Fails with the subject's 410 unless it may still be answered. */
    assertOpen: (row: Row) => assertOpen(subject, row),
    sendCode: (em: Em, token: string) => sendCode(f, em, token),
    decide: (em: Em, token: string, accept: boolean, proof: PageProof) => decide(f, em, token, accept, proof),
    sessionFits: (em: Em, token: string, sessionId: string) => sessionFits(f, em, token, sessionId),
    decideWithSession: (
      em: Em,
      token: string,
      accept: boolean,
      sessionId: string,
      proof: Omit<PageProof, "code">,
    ) => decideWithSession(f, em, token, accept, sessionId, proof),
    createPrompt: (em: Em, userId: string, id: string, ttlSeconds: number) =>
      createPrompt(f, em, userId, id, ttlSeconds),
  };
}
