import type { PartnerService } from "../partners/partner.service.ts";
import {
  createDecisionFlow,
  type DecisionEvidence,
  type DecisionFlow,
  type DecisionSubject,
  type HostedOutcome,
} from "../person/hosted-pages.service.ts";
import type { CodeSubject, PersonService } from "../person/person.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import { lagosDay } from "../platform/dates.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import { contextOf, inSpan } from "../platform/telemetry.ts";
import type { Environment } from "../platform/tenancy.ts";
import { createPageTokenLookup } from "../platform/unknown-set.ts";
import type { UserService } from "../users/user.service.ts";
import type { AcceptedInstallment, Disbursement } from "./disbursement.entity.ts";
import { disbursementRepository as repo } from "./disbursement.repository.ts";
import type { Installment } from "./installment.entity.ts";

/** The queue of payout jobs, one per disbursement (the claim on its row lets one attempt act at a time). */
export const PAYOUT_QUEUE = "disbursements.payout";
/** The queue of debit jobs, one per installment, due on its date. */
export const COLLECT_QUEUE = "repayments.collect";

/** How long a person has to answer a mandate unless the partner asks otherwise, and the bounds. */
export const MANDATE_HOURS = { default: 24, min: 1, max: 168 } as const;

/** Binds a sealed mandate page token to its disbursement. */
export const mandateTokenAad = (disbursementId: string) => `mandate-token:${disbursementId}`;
/** Binds a mandate's sealed evidence to its disbursement. */
export const mandateEvidenceAad = (disbursementId: string) => `mandate-evidence:${disbursementId}`;

/** What the mandate page shows. */
export interface MandateView {
  disbursement: Disbursement;
  installments: Installment[];
  /** The sum of the installments, kobo. */
  totalKobo: bigint;
  partnerName: string;
  environment: Environment;
  /** `PENDING` while the person may answer, `CANCELLED` (also once lapsed), or `ACCEPTED` (whatever came after). */
  status: string;
  /** Why it was cancelled, when it was (`mandate_expired` once lapsed). */
  reason: string | null;
  phoneLast4: string;
  url: string;
  redirectUrl: null;
}

/** What {@link createMandateService} returns. */
export type MandateService = ReturnType<typeof createMandateService>;

/** What the mandate service needs. */
export interface MandateServiceOptions {
  clock: Clock;
  box: SecretBox;
  users: UserService;
  partners: PartnerService;
  person: PersonService;
  jobs: Jobs;
  /** Base URL of the hosted pages (PUBLIC_URL, or the partner listener). */
  publicUrl: () => string;
}

/** An unanswered mandate past its time: it is CANCELLED, whether or not the minute sweep has run yet. */
const lapsed = (o: MandateServiceOptions, d: Disbursement) =>
  d.status === "AWAITING_ACCEPTANCE" && (d.acceptanceExpiresAt?.getTime() ?? 0) <= o.clock.now().getTime();

const tokenOf = (o: MandateServiceOptions, d: Disbursement) =>
  d.acceptanceTokenEnc ? o.box.open(d.acceptanceTokenEnc, mandateTokenAad(d.id)).toString("utf8") : "";

/** The disbursement as partners see it now: an unanswered mandate past its time is CANCELLED. */
function current(o: MandateServiceOptions, d: Disbursement): Disbursement {
  return lapsed(o, d)
    ? { ...d, status: "CANCELLED", failureReason: "mandate_expired", cancelledAt: d.acceptanceExpiresAt }
    : d;
}

/** Whom a mandate's codes go to: the borrower's number on the platform, counted per partner and environment. */
async function subjectOf(
  o: MandateServiceOptions,
  em: Em,
  d: Disbursement,
): Promise<CodeSubject & { phoneLast4: string }> {
  const contact = await o.users.contactOf(em, d.userId);
  if (!contact) throw new Error(`no user ${d.userId}`);
  return {
    id: d.id,
    owner: `${d.partnerId}:${d.environment}`,
    environment: d.environment,
    phoneHash: contact.phoneHash,
    phoneLast4: contact.phoneLast4,
  };
}

/**
 * Accepts or declines a mandate locked for update, still open (the caller checked), for a person who proved
 * who they are. An acceptance records the schedule as shown with its evidence, and queues the payout and
 * every debit in the same transaction.
 */
async function decideRow(
  o: MandateServiceOptions,
  tx: Em,
  d: Disbursement,
  accept: boolean,
  evidence: DecisionEvidence,
): Promise<HostedOutcome & { disbursementId: string }> {
  const now = o.clock.now();
  if (!accept) {
    await repo.cancelMandate(tx, d.id, "mandate_declined", now);
    return { outcome: "declined", disbursementId: d.id };
  }
  const installments = await repo.schedule(tx, d.id, true);
  // Accepted too late for its own schedule: the first debit would fall due today or earlier.
  if ((installments[0]?.dueDate ?? "") <= lagosDay(now)) {
    await repo.cancelMandate(tx, d.id, "schedule_lapsed", now);
    return { outcome: "gone", disbursementId: d.id };
  }
  const schedule: AcceptedInstallment[] = installments.map((i) => ({
    dueDate: i.dueDate,
    amountKobo: i.amountKobo.toString(),
  }));
  const accepted = await repo.accept(tx, d.id, {
    acceptanceMethod: evidence.method,
    acceptedSchedule: schedule,
    acceptedTotalKobo: installments.reduce((sum, i) => sum + i.amountKobo, 0n),
    acceptanceEvidenceEnc:
      evidence.ip || evidence.userAgent
        ? o.box.seal(
            Buffer.from(JSON.stringify({ ip: evidence.ip ?? "", userAgent: evidence.userAgent ?? "" })),
            mandateEvidenceAad(d.id),
          )
        : null,
    acceptanceTermsHash: sha256(evidence.terms),
    scheduleAcceptedAt: now,
  });
  if (!accepted) throw new ApiError("mandate_gone");
  // The payout and every debit are queued in the acceptance's transaction: nothing before it, nothing lost. With
  // tracing on, in a span of the partner's call that created the disbursement, which their jobs then continue.
  await inSpan(
    "disbursement.accept",
    { "partner_api.disbursement_id": d.id },
    async () => {
      await o.jobs.send(tx, PAYOUT_QUEUE, { disbursementId: d.id });
      await o.jobs.insert(
        tx,
        COLLECT_QUEUE,
        installments.map((i) => ({ data: { installmentId: i.id }, startAfter: i.nextAttemptAt ?? now })),
      );
    },
    contextOf({ traceparent: d.traceParent }),
  );
  return { outcome: "accepted", disbursementId: d.id };
}

/** The canonical terms of a mandate, for an answer given without the page (its hash is kept as evidence). */
const canonicalTerms = (d: Disbursement, installments: Installment[]) =>
  JSON.stringify({
    partnerId: d.partnerId,
    principalKobo: d.principalKobo.toString(),
    installments: installments.map((i) => ({ dueDate: i.dueDate, amountKobo: i.amountKobo.toString() })),
  });

/**
 * A repayment mandate as a hosted decision: for the disbursement's own user, whose number the codes go to;
 * five wrong codes cancel it (`mandate_locked`); accepting starts the payout and schedules the debits.
 */
function mandateDecisions(
  o: MandateServiceOptions,
  byToken: (em: Em, token: string, lock: boolean) => Promise<Disbursement>,
): DecisionSubject<Disbursement> {
  return {
    goneCode: "mandate_gone",
    byToken,
    id: (d) => d.id,
    partnerId: (d) => d.partnerId,
    // A lapsed mandate is CANCELLED whether or not the minute sweep has written it yet.
    closedAs: (d) => (lapsed(o, d) ? "CANCELLED" : d.status === "AWAITING_ACCEPTANCE" ? undefined : d.status),
    codeSubject: (em, d) => subjectOf(o, em, d),
    codeMessage: (code, partner) =>
      `${code} is your code to answer ${partner}'s loan offer. It expires in 10 minutes. Never share it.`,
    holder: async (_em, d) => d.userId,
    async lockOut(tx, d) {
      await repo.cancelMandate(tx, d.id, "mandate_locked", o.clock.now());
    },
    record: (tx, d, accept, evidence) => decideRow(o, tx, d, accept, evidence),
    async forPrompt(em, userId, disbursementId) {
      const d = isId("dsb", disbursementId) ? await repo.findAny(em, disbursementId) : undefined;
      if (!d || d.userId !== userId)
        throw new ApiError("not_found", `No disbursement ${disbursementId} of user ${userId}.`);
      return { row: d, environment: d.environment };
    },
  };
}

/** What the mandate page shows for a token, answered or not. */
async function page(
  o: MandateServiceOptions,
  byToken: (em: Em, token: string, lock: boolean) => Promise<Disbursement>,
  em: Em,
  token: string,
): Promise<MandateView> {
  const d = await byToken(em, token, false);
  const [installments, names, subject] = [
    await repo.schedule(em, d.id, true),
    await o.partners.names(em, [d.partnerId]),
    await subjectOf(o, em, d),
  ];
  const shown = current(o, d);
  return {
    disbursement: d,
    installments,
    totalKobo: installments.reduce((sum, i) => sum + i.amountKobo, 0n),
    partnerName: names.get(d.partnerId) ?? "",
    environment: d.environment,
    status:
      shown.status === "AWAITING_ACCEPTANCE"
        ? "PENDING"
        : shown.status === "CANCELLED"
          ? "CANCELLED"
          : "ACCEPTED",
    reason: shown.failureReason ?? null,
    phoneLast4: subject.phoneLast4,
    url: `${o.publicUrl()}/mandate/${token}`,
    redirectUrl: null,
  };
}

/**
 * The person's answer to a mandate of the caller's, by id: the sandbox helpers act for the person, as if
 * they had given the sandbox's fixed code on the page (the acceptance says `OTP_SMS`).
 */
async function decideInSandbox(
  o: MandateServiceOptions,
  flow: DecisionFlow<Disbursement>,
  em: Em,
  id: string,
  accept: boolean,
): Promise<void> {
  const result = await em.transactional(async (tx) => {
    const d = isId("dsb", id) ? await repo.findLocked(tx, id) : undefined;
    if (!d) throw new ApiError("not_found", `No disbursement ${id}.`);
    if (d.environment !== "sandbox") throw new ApiError("sandbox_only");
    const terms = canonicalTerms(d, await repo.schedule(tx, d.id, true));
    flow.assertOpen(d);
    return decideRow(o, tx, d, accept, { method: "OTP_SMS", at: o.clock.now(), terms });
  });
  // Said after the cancellation is committed.
  if (result.outcome === "gone")
    throw new ApiError("mandate_gone", "The schedule's first due date has passed; the mandate is cancelled.");
}

/** Cancels mandates left unanswered past their time (`mandate_expired`); the minute sweep runs it. */
async function expireDue(o: MandateServiceOptions, em: Em, limit = 500): Promise<number> {
  const ids = await repo.lapsedMandates(em, o.clock.now(), limit);
  for (const id of ids) {
    await em.transactional(async (tx) => {
      const d = await repo.lock(tx, id);
      if (d && lapsed(o, d))
        await repo.cancelMandate(tx, id, "mandate_expired", d.acceptanceExpiresAt ?? o.clock.now());
    });
  }
  return ids.length;
}

/**
 * When a mandate asked for `hours` (0: the default) lapses: then, or when its first due date begins in Lagos,
 * whichever comes first (a schedule accepted on or after its first due date would be debited at once, or
 * late). 422 outside 1–168 hours.
 */
function expiresAt(now: Date, hours: number, firstDueDate?: string): Date {
  const h = hours || MANDATE_HOURS.default;
  if (!Number.isInteger(h) || h < MANDATE_HOURS.min || h > MANDATE_HOURS.max)
    throw validationFailed({
      acceptanceExpiresInHours: `must be ${MANDATE_HOURS.min} to ${MANDATE_HOURS.max}`,
    });
  const asked = now.getTime() + h * ms.hour;
  const dueStarts = firstDueDate ? Date.parse(`${firstDueDate}T00:00:00+01:00`) : Number.NaN;
  return new Date(Number.isNaN(dueStarts) ? asked : Math.min(asked, dueStarts));
}

/**
 * Repayment mandates (CONTRACT.md §6): a disbursement waits AWAITING_ACCEPTANCE until the person, who proves
 * who they are on the hosted page (a texted code, or the platform's prompt session), accepts its schedule.
 * Only then is its payout queued and its debits scheduled, in the acceptance's transaction; a decline, a
 * lapse, or five wrong codes cancel it (no payout, no fee). The acceptance is the debit authority. The page's
 * decision is the hosted pages' decision flow.
 */
export function createMandateService(o: MandateServiceOptions) {
  const byToken = createPageTokenLookup(
    (em, hash, lock) => repo.findByAcceptanceToken(em, hash, lock),
    "No such repayment mandate.",
  );
  const flow = createDecisionFlow(o, mandateDecisions(o, byToken));
  return {
    /**
     * Fails with `unavailable` when the person could not be asked here: production without an SMS provider
     * cannot send the code that proves who they are on the mandate page (as for consent links).
     */
    assertCanAsk(environment: Environment): void {
      if (!o.person.canSend(environment))
        throw new ApiError(
          "unavailable",
          "No SMS provider is configured for production, so the person could not be sent the one-time code that proves who they are on the mandate page: disbursements cannot be created.",
        );
    },

    /** A new mandate page token for a disbursement: the token (for the URL), its hash and its sealed copy. */
    mint(disbursementId: string): { tokenHash: Buffer; tokenEnc: Buffer } {
      const token = randomBase62(32);
      return {
        tokenHash: sha256(token),
        tokenEnc: o.box.seal(Buffer.from(token), mandateTokenAad(disbursementId)),
      };
    },

    expiresAt,

    /** The mandate page's URL while the person may still answer; empty after. */
    acceptanceUrl(d: Disbursement): string {
      return d.status === "AWAITING_ACCEPTANCE" && !lapsed(o, d) && d.acceptanceTokenEnc
        ? `${o.publicUrl()}/mandate/${tokenOf(o, d)}`
        : "";
    },

    current: (d: Disbursement) => current(o, d),
    page: (em: Em, token: string) => page(o, byToken, em, token),
    /** Texts the person a one-time code for the mandate page (to the number the platform holds). */
    sendCode: flow.sendCode,
    /** The person's answer on the page, with their code; five wrong ones cancel it (`mandate_locked`). */
    decide: flow.decide,
    sessionFits: flow.sessionFits,
    /** The signed-in person's answer through a prompt session: only for their own disbursement. */
    decideWithSession: flow.decideWithSession,
    decideInSandbox: (em: Em, id: string, accept: boolean) => decideInSandbox(o, flow, em, id, accept),
    /** The dashboard's prompt for an AWAITING_ACCEPTANCE disbursement of that user (30 to 900 seconds). */
    createPrompt: flow.createPrompt,

    /** The token of a mandate's page (a prompt session opened for it leads there). */
    async pageToken(em: Em, disbursementId: string): Promise<string> {
      const d = await repo.findAny(em, disbursementId);
      if (!d?.acceptanceTokenEnc) throw new ApiError("not_found", "No such repayment mandate.");
      return tokenOf(o, d);
    },

    expireDue: (em: Em, limit?: number) => expireDue(o, em, limit),
  };
}
