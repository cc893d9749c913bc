import type { Em } from "../platform/db/orm.ts";
import type { ErrorCode } from "../platform/errors.ts";
import type { Environment } from "../platform/tenancy.ts";

/** What every hosted decision page shows about its subject (a consent link, a repayment mandate). */
export interface HostedView {
  /** `PENDING` while the person may still answer; anything else shows the flow's "gone" page. */
  status: string;
  partnerName: string;
  environment: Environment;
  /** The last four digits of the phone number the code goes to. */
  phoneLast4: string;
  /** The page's own URL (an https URL makes the cookies `Secure`). */
  url: string;
  /** Where the browser goes after a decision, if the partner asked for it. */
  redirectUrl: string | null;
}

/** What the person sent with their decision. */
export interface PageProof {
  /** The one-time code they were sent. */
  code: string;
  ip: string | undefined;
  userAgent: string | undefined;
  /** The exact terms the page showed (hashed into the evidence). */
  terms: string;
}

/** The outcome of a decision on a hosted page. */
export type HostedOutcome =
  | {
      outcome:
        | "accepted"
        | "declined"
        | "no_account"
        | "code_expired"
        | "locked"
        | "gone"
        | "not_this_person";
    }
  | { outcome: "wrong_code"; triesLeft: number };

/** A title and a sentence, for a page that only tells. */
export interface Note {
  title: string;
  text: string;
}

/**
 * One kind of hosted decision page: where it lives, how its subject is read and decided, and what it says.
 * The page machinery (the code step, prompt sessions, anti-forgery, errors) is the same for every flow.
 */
export interface HostedFlow<V extends HostedView> {
  /** The cookie and path name: pages live at `/<name>/{token}`. */
  name: "consent" | "mandate";
  /** The 410 code of a subject that can no longer be answered. */
  goneCode: ErrorCode;
  page(em: Em, token: string): Promise<V>;
  sendCode(em: Em, token: string): Promise<unknown>;
  decide(em: Em, token: string, accept: boolean, proof: PageProof): Promise<HostedOutcome>;
  /** True when the opened prompt session may still answer this page's subject. */
  sessionFits(em: Em, token: string, sessionId: string): Promise<boolean>;
  decideWithSession(
    em: Em,
    token: string,
    accept: boolean,
    sessionId: string,
    proof: Omit<PageProof, "code">,
  ): Promise<HostedOutcome>;
  /** The page's title. */
  title(view: V): string;
  /** The terms as HTML, deterministic from the subject: this exact text is hashed into the evidence. */
  terms(view: V): string;
  acceptLabel(view: V): string;
  declineLabel(view: V): string;
  /** What a subject that can no longer be answered says, by its status. */
  gone(view: V): Note;
  done(outcome: "accepted" | "declined"): Note;
  /** Query parameters added to the partner's redirect after a decision. */
  redirectParams(view: V): Record<string, string>;
}
