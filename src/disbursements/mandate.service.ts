import type { PartnerService } from "../partners/partner.service.ts";
import type { HostedOutcome, PageProof } from "../person/hosted-page.ts";
import type { CodeSubject, PersonService } from "../person/person.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { randomBase62, sha256 } from "../platform/crypto/tokens.ts";
import { lagosDay } from "../platform/dates.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, isApiError, validationFailed } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
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

/** The person's evidence for an acceptance. */
interface Evidence {
  method: "OTP_SMS" | "PLATFORM_SESSION";
  ip?: string | undefined;
  userAgent?: string | undefined;
  terms: string;
}

/** What {@link createMandateService} returns. */
export type MandateService = ReturnType<typeof createMandateService>;

/**
 * Repayment mandates (CONTRACT.md §6): a disbursement waits AWAITING_ACCEPTANCE until the person, who proves
 * who they are on the hosted page (a texted code, or the platform's prompt session), accepts its schedule.
 * Only then is its payout queued and its debits scheduled, in the acceptance's transaction; a decline, a
 * lapse, or five wrong codes cancel it (no payout, no fee). The acceptance is the debit authority.
 */
export function createMandateService(o: {
  clock: Clock;
  box: SecretBox;
  users: UserService;
  partners: PartnerService;
  person: PersonService;
  jobs: Jobs;
  /** Base URL of the hosted pages (PUBLIC_URL, or the partner listener). */
  publicUrl: () => string;
}) {
  const { clock } = o;
  const tokenOf = (d: Disbursement) =>
    d.acceptanceTokenEnc ? o.box.open(d.acceptanceTokenEnc, mandateTokenAad(d.id)).toString("utf8") : "";
  const lapsed = (d: Disbursement) =>
    d.status === "AWAITING_ACCEPTANCE" && (d.acceptanceExpiresAt?.getTime() ?? 0) <= clock.now().getTime();

  const byToken = createPageTokenLookup(
    (em, hash, lock) => repo.findByAcceptanceToken(em, hash, lock),
    "No such repayment mandate.",
  );

  const subjectOf = async (em: Em, d: Disbursement): Promise<CodeSubject & { phoneLast4: string }> => {
    const contact = await o.users.contactOf(em, d.userId);
    if (!contact) throw new Error(`no user ${d.userId}`);
    return {
      id: d.id,
      owner: `${d.partnerId}:${d.environment}`,
      environment: d.environment,
      phoneHash: contact.phoneHash,
      phoneLast4: contact.phoneLast4,
    };
  };

  /** Only an unanswered, unexpired mandate can be answered, once. */
  const assertOpen = (d: Disbursement) => {
    if (d.status !== "AWAITING_ACCEPTANCE" || lapsed(d))
      throw new ApiError("mandate_gone", undefined, {
        details: { status: lapsed(d) ? "CANCELLED" : d.status },
      });
  };

  /** Accepts or declines a mandate locked for update, for a person who proved who they are. */
  const decideRow = async (
    tx: Em,
    d: Disbursement,
    accept: boolean,
    evidence: Evidence,
  ): Promise<HostedOutcome & { disbursementId: string }> => {
    assertOpen(d);
    const now = clock.now();
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
    // The payout and every debit are queued in the acceptance's transaction: nothing before it, nothing lost.
    await o.jobs.send(tx, PAYOUT_QUEUE, { disbursementId: d.id });
    await o.jobs.insert(
      tx,
      COLLECT_QUEUE,
      installments.map((i) => ({ data: { installmentId: i.id }, startAfter: i.nextAttemptAt ?? now })),
    );
    return { outcome: "accepted", disbursementId: d.id };
  };

  /** The canonical terms of a mandate, for an answer given without the page (its hash is kept as evidence). */
  const canonicalTerms = (d: Disbursement, installments: Installment[]) =>
    JSON.stringify({
      partnerId: d.partnerId,
      principalKobo: d.principalKobo.toString(),
      installments: installments.map((i) => ({ dueDate: i.dueDate, amountKobo: i.amountKobo.toString() })),
    });

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

    /**
     * When a mandate asked for `hours` (0: the default) lapses: then, or when its first due date begins in
     * Lagos, whichever comes first (a schedule accepted on or after its first due date would be debited at
     * once, or late). 422 outside 1–168 hours.
     */
    expiresAt(now: Date, hours: number, firstDueDate?: string): Date {
      const h = hours || MANDATE_HOURS.default;
      if (!Number.isInteger(h) || h < MANDATE_HOURS.min || h > MANDATE_HOURS.max)
        throw validationFailed({
          acceptanceExpiresInHours: `must be ${MANDATE_HOURS.min} to ${MANDATE_HOURS.max}`,
        });
      const asked = now.getTime() + h * ms.hour;
      const dueStarts = firstDueDate ? Date.parse(`${firstDueDate}T00:00:00+01:00`) : Number.NaN;
      return new Date(Number.isNaN(dueStarts) ? asked : Math.min(asked, dueStarts));
    },

    /** The mandate page's URL while the person may still answer; empty after. */
    acceptanceUrl(d: Disbursement): string {
      return d.status === "AWAITING_ACCEPTANCE" && !lapsed(d) && d.acceptanceTokenEnc
        ? `${o.publicUrl()}/mandate/${tokenOf(d)}`
        : "";
    },

    /** The disbursement as partners see it now: an unanswered mandate past its time is CANCELLED. */
    current(d: Disbursement): Disbursement {
      return lapsed(d)
        ? { ...d, status: "CANCELLED", failureReason: "mandate_expired", cancelledAt: d.acceptanceExpiresAt }
        : d;
    },

    /** What the mandate page shows for a token, answered or not. */
    async page(em: Em, token: string): Promise<MandateView> {
      const d = await byToken(em, token, false);
      const [installments, names, subject] = [
        await repo.schedule(em, d.id, true),
        await o.partners.names(em, [d.partnerId]),
        await subjectOf(em, d),
      ];
      const shown = this.current(d);
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
    },

    /** Texts the person a one-time code for the mandate page (to the number the platform holds). */
    async sendCode(em: Em, token: string): Promise<{ expiresAt: Date }> {
      const d = await byToken(em, token, false);
      assertOpen(d);
      const names = await o.partners.names(em, [d.partnerId]);
      const partner = names.get(d.partnerId) ?? "A lender";
      try {
        return await o.person.send(
          em,
          await subjectOf(em, d),
          (code) =>
            `${code} is your code to answer ${partner}'s loan offer. It expires in 10 minutes. Never share it.`,
        );
      } catch (err) {
        // The code service says a page locked by wrong codes is gone in the consent link's words.
        if (isApiError(err) && err.code === "consent_link_gone") throw new ApiError("mandate_gone");
        throw err;
      }
    },

    /**
     * The person's answer on the page, with the code they were sent. A wrong code is counted and committed;
     * five lock the mandate for good (CANCELLED, `mandate_locked`).
     */
    async decide(em: Em, token: string, accept: boolean, proof: PageProof): Promise<HostedOutcome> {
      return em.transactional(async (tx): Promise<HostedOutcome> => {
        const d = await byToken(tx, token, true);
        assertOpen(d);
        const check = await o.person.check(tx, await subjectOf(tx, d), proof.code);
        if (check === "locked") {
          await repo.cancelMandate(tx, d.id, "mandate_locked", clock.now());
          return { outcome: "locked" };
        }
        if (check === "expired" || check === "none") return { outcome: "code_expired" };
        if (check === "wrong")
          return { outcome: "wrong_code", triesLeft: await o.person.triesLeft(tx, await subjectOf(tx, d)) };
        return decideRow(tx, d, accept, { method: "OTP_SMS", ...proof });
      });
    },

    /** True when the opened prompt session may still answer this page's mandate. */
    async sessionFits(em: Em, token: string, sessionId: string): Promise<boolean> {
      const d = await byToken(em, token, false);
      return (await o.person.sessionUser(em, sessionId, d.id, false)) !== undefined;
    },

    /** The signed-in person's answer through a prompt session: only for their own disbursement. */
    async decideWithSession(
      em: Em,
      token: string,
      accept: boolean,
      sessionId: string,
      proof: Omit<PageProof, "code">,
    ): Promise<HostedOutcome> {
      return em.transactional(async (tx): Promise<HostedOutcome> => {
        const d = await byToken(tx, token, true);
        assertOpen(d);
        const sessionUser = await o.person.sessionUser(tx, sessionId, d.id, false);
        if (!sessionUser || sessionUser !== d.userId) return { outcome: "not_this_person" };
        await o.person.sessionUser(tx, sessionId, d.id, true);
        return decideRow(tx, d, accept, { method: "PLATFORM_SESSION", ...proof });
      });
    },

    /**
     * The person's answer to a mandate of the caller's, by id: the sandbox helpers act for the person, as if
     * they had given the sandbox's fixed code on the page (the acceptance says `OTP_SMS`).
     */
    async decideInSandbox(em: Em, id: string, accept: boolean): Promise<void> {
      const result = await em.transactional(async (tx) => {
        const d = isId("dsb", id) ? await repo.findLocked(tx, id) : undefined;
        if (!d) throw new ApiError("not_found", `No disbursement ${id}.`);
        if (d.environment !== "sandbox") throw new ApiError("sandbox_only");
        const terms = canonicalTerms(d, await repo.schedule(tx, d.id, true));
        return decideRow(tx, d, accept, { method: "OTP_SMS", terms });
      });
      // Said after the cancellation is committed.
      if (result.outcome === "gone")
        throw new ApiError(
          "mandate_gone",
          "The schedule's first due date has passed; the mandate is cancelled.",
        );
    },

    /**
     * The dashboard's prompt for a mandate: a URL that opens its page for the signed-in user, once, within
     * `ttlSeconds` (30 to 900). Only an AWAITING_ACCEPTANCE disbursement of that user.
     */
    async createPrompt(
      em: Em,
      userId: string,
      disbursementId: string,
      ttlSeconds: number,
    ): Promise<{ url: string; expiresAt: Date }> {
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 30 || ttlSeconds > 900)
        throw validationFailed({ expiresInSeconds: "must be 30 to 900" });
      const d = isId("dsb", disbursementId) ? await repo.findAny(em, disbursementId) : undefined;
      if (!d || d.userId !== userId)
        throw new ApiError("not_found", `No disbursement ${disbursementId} of user ${userId}.`);
      assertOpen(d);
      const { token, expiresAt } = await o.person.createSession(em, {
        userId,
        environment: d.environment,
        subject: d.id,
        ttlMs: ttlSeconds * 1000,
      });
      return { url: `${o.publicUrl()}/prompt/${token}`, expiresAt };
    },

    /** The token of a mandate's page (a prompt session opened for it leads there). */
    async pageToken(em: Em, disbursementId: string): Promise<string> {
      const d = await repo.findAny(em, disbursementId);
      if (!d?.acceptanceTokenEnc) throw new ApiError("not_found", "No such repayment mandate.");
      return tokenOf(d);
    },

    /** Cancels mandates left unanswered past their time (`mandate_expired`); the minute sweep runs it. */
    async expireDue(em: Em, limit = 500): Promise<number> {
      const ids = await repo.lapsedMandates(em, clock.now(), limit);
      for (const id of ids) {
        await em.transactional(async (tx) => {
          const d = await repo.lock(tx, id);
          if (d && lapsed(d))
            await repo.cancelMandate(tx, id, "mandate_expired", d.acceptanceExpiresAt ?? clock.now());
        });
      }
      return ids.length;
    },
  };
}
