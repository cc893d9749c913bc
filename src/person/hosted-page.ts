import { createHmac, randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { secretKeyOf } from "../platform/crypto/keys.ts";
import { constantTimeEqualStrings } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, type ErrorCode, isApiError, validationFailed } from "../platform/errors.ts";
import { isHostName } from "../platform/hostname.ts";
import type { AnyResponse } from "../platform/http/rest-errors.ts";
import { restErrorBody } from "../platform/http/rest-errors.ts";
import type { Logger } from "../platform/logger.ts";
import type { Environment } from "../platform/tenancy.ts";
import { SANDBOX_CODE } from "./person.service.ts";

type Req = IncomingMessage | Http2ServerRequest;

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

/** Options for {@link createHostedPages}. */
export interface HostedPagesOptions {
  /** Key of the anti-forgery tokens and session cookies (derived from the master key). */
  csrfKey: Buffer;
  logger: Logger;
}

const MAX_FORM_BYTES = 4096;

/** Escapes text for HTML. */
export const escapeHtml = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

const STYLE = `
  :root { color-scheme: light; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 17px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a; background: #f4f5f7; }
  main { max-width: 34rem; margin: 0 auto; padding: 1.25rem; }
  .card { background: #fff; border-radius: 12px; padding: 1.25rem; box-shadow: 0 1px 3px rgba(0,0,0,.12); }
  h1 { font-size: 1.4rem; line-height: 1.3; margin: 0 0 .75rem; }
  h2 { font-size: 1.05rem; margin: 1.25rem 0 .5rem; }
  ul { padding-left: 1.2rem; margin: .25rem 0; }
  li { margin: .4rem 0; }
  p { margin: .5rem 0; }
  table { width: 100%; border-collapse: collapse; margin: .25rem 0; }
  th, td { text-align: left; padding: .4rem .25rem; border-bottom: 1px solid #d5d8dc; }
  td.amount, th.amount { text-align: right; font-variant-numeric: tabular-nums; }
  tfoot td, tfoot th { font-weight: 700; border-bottom: none; }
  .muted { color: #4a4f57; font-size: .95rem; }
  .actions { display: flex; flex-direction: column; gap: .75rem; margin-top: 1.5rem; }
  button { font: inherit; font-weight: 600; min-height: 48px; border-radius: 10px; border: 2px solid #0b5cad; cursor: pointer; padding: .6rem 1rem; }
  button.accept { background: #0b5cad; color: #fff; }
  button.decline { background: #fff; color: #0b5cad; }
  button.link { background: none; border: none; color: #0b5cad; text-decoration: underline; min-height: 44px; padding: .25rem 0; }
  label { display: block; font-weight: 600; margin-top: 1rem; }
  input[name=code] { font: inherit; font-size: 1.4rem; letter-spacing: .3em; width: 100%; max-width: 12rem; min-height: 48px; padding: .4rem .6rem; border: 2px solid #4a4f57; border-radius: 8px; }
  input[name=code]:focus-visible { outline: 3px solid #1a1a1a; outline-offset: 2px; }
  .error { color: #a4000f; font-weight: 600; }
  .note { background: #fff7d6; border-radius: 8px; padding: .5rem .75rem; }
  .resend { margin-top: .75rem; }
  button:focus-visible { outline: 3px solid #1a1a1a; outline-offset: 2px; }
  @media (min-width: 30rem) { .actions { flex-direction: row-reverse; } .actions button { flex: 1; } }
`;

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
<div class="card">
${body}
</div>
</main>
</body>
</html>`;
}

function message(note: Note): string {
  return layout(note.title, `<h1>${escapeHtml(note.title)}</h1>\n<p>${escapeHtml(note.text)}</p>`);
}

/**
 * The token in the path. Tokens are plain base62, so a path that does not decode (`%FF`, a lone `%`) is
 * simply no token: it is not found, never an exception.
 */
function tokenOf(req: Req, prefix: string): string {
  const raw = (req.url ?? "").split("?")[0]?.slice(prefix.length) ?? "";
  try {
    return decodeURIComponent(raw);
  } catch {
    return "";
  }
}

function wantsJson(req: Req): boolean {
  return (
    /application\/json/.test(String(req.headers.accept ?? "")) &&
    !/text\/html/.test(String(req.headers.accept ?? ""))
  );
}

function cookie(req: Req, name: string): string | undefined {
  for (const part of String(req.headers.cookie ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

async function readForm(req: Req): Promise<URLSearchParams> {
  const type = String(req.headers["content-type"] ?? "");
  if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type))
    throw new ApiError("unsupported_media_type", "Send the form.");
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new ApiError("payload_too_large");
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

const NOT_ALLOWED: Note = { title: "Not allowed", text: "Open the link in your browser." };
const FAILED: Note = { title: "Something went wrong", text: "Please try again in a moment." };
const NOT_FOUND: Note = {
  title: "Link not found",
  text: "Check that you opened the whole link from your messages.",
};
const FORGED: Note = {
  title: "Please open the link again",
  text: "For your safety this request was refused. Open the link from your messages and try again.",
};
const SOMEONE_ELSE: Note = {
  title: "This request is for someone else",
  text: "It was sent to another phone number than the one on your account, so you cannot answer it.",
};

/** Renders a flow's steps. */
function renderer<V extends HostedView>(flow: HostedFlow<V>) {
  const action = (token: string) => `/${flow.name}/${escapeHtml(token)}`;
  const sandboxNote = (view: V) =>
    view.environment === "sandbox"
      ? `<p class="note">Sandbox: no text message is sent. The code is <strong>${SANDBOX_CODE}</strong>.</p>`
      : "";
  const decisionButtons = (view: V) => `<div class="actions">
<button class="accept" type="submit" name="decision" value="accept">${escapeHtml(flow.acceptLabel(view))}</button>
<button class="decline" type="submit" name="decision" value="decline">${escapeHtml(flow.declineLabel(view))}</button>
</div>`;
  return {
    /** First step: the terms, and a button that texts the person a code. Nothing can be decided yet. */
    intro: (view: V, csrf: string, token: string) =>
      layout(
        flow.title(view),
        `${flow.terms(view)}
<h2>First, check it is you</h2>
<p>We will text a 6-digit code to your phone number ending in ${escapeHtml(view.phoneLast4)}.</p>
${sandboxNote(view)}
<form method="post" action="${action(token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<div class="actions">
<button class="accept" type="submit" name="step" value="send">Text me a code</button>
</div>
</form>`,
      ),
    /** For a person the platform signed in (a prompt session): the terms and the decision, no code. */
    session: (view: V, csrf: string, token: string) =>
      layout(
        flow.title(view),
        `${flow.terms(view)}
<p class="note">You are signed in to your account, so no code is needed.</p>
<form method="post" action="${action(token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<input type="hidden" name="step" value="decide">
${decisionButtons(view)}
</form>`,
      ),
    /** Second step: the code the person was texted, and their decision. */
    code: (view: V, csrf: string, token: string, problem?: string) => {
      const error = problem ? `<p class="error" id="code-error" role="alert">${escapeHtml(problem)}</p>` : "";
      return layout(
        flow.title(view),
        `${flow.terms(view)}
<h2>Enter the code we texted you</h2>
<p>We sent a 6-digit code to your phone number ending in ${escapeHtml(view.phoneLast4)}. It works for 10 minutes.</p>
${sandboxNote(view)}
<form method="post" action="${action(token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<input type="hidden" name="step" value="decide">
<label for="code">Code</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required${problem ? ' aria-invalid="true" aria-describedby="code-error"' : ""}>
${error}
${decisionButtons(view)}
</form>
<form method="post" action="${action(token)}" class="resend">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button class="link" type="submit" name="step" value="send">Send a new code</button>
</form>`,
      );
    },
  };
}

/** What {@link createHostedPages} returns. */
export type HostedPages = ReturnType<typeof createHostedPages>;

/**
 * The hosted decision pages (consent links, repayment mandates): server-rendered HTML that works without
 * JavaScript and fits a small phone screen. The person proves who they are first, with a one-time code or a
 * prompt session, and only then can decide. Cross-site form posts are refused (a SameSite=Strict cookie whose
 * value the form must echo, signed with the page's token, and Origin / Sec-Fetch-Site checks).
 */
export function createHostedPages({ csrfKey, logger }: HostedPagesOptions) {
  const sign = (token: string, nonce: string) =>
    createHmac("sha256", secretKeyOf(csrfKey)).update(`${token}.${nonce}`).digest("hex");
  const sessionMac = (id: string) =>
    createHmac("sha256", secretKeyOf(csrfKey)).update(`session.${id}`).digest("hex");
  /** The prompt session the browser holds for this flow, when its cookie is ours. */
  const sessionOf = (req: Req, name: string): string | undefined => {
    const [id, mac] = (cookie(req, `${name}_session`) ?? "").split(".");
    return id && mac && constantTimeEqualStrings(mac, sessionMac(id)) ? id : undefined;
  };

  const send = (res: AnyResponse, status: number, html: string, extra: Record<string, string> = {}) => {
    res.statusCode = status;
    const headers: Record<string, string> = {
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      // same-origin, not no-referrer: with no-referrer browsers send `Origin: null` on the form post.
      "referrer-policy": "same-origin",
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      "content-security-policy":
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
      ...extra,
    };
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.setHeader("content-length", Buffer.byteLength(html));
    res.end(html);
  };

  const fail = (req: Req, res: AnyResponse, requestId: string, err: ApiError, html: string) => {
    if (err.retryAfterSeconds !== undefined) res.setHeader("retry-after", String(err.retryAfterSeconds));
    // The rest of a refused body is never read: on HTTP/1.1 the connection closes after the answer, so the
    // client's next request is not taken for more of this body.
    if (err.code === "payload_too_large" && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    if (wantsJson(req)) {
      const body = restErrorBody(err, requestId);
      res.statusCode = err.httpStatus;
      res.setHeader("content-type", "application/json; charset=utf-8");
      res.setHeader("content-length", Buffer.byteLength(body));
      res.end(body);
      return;
    }
    send(res, err.httpStatus, html);
  };

  /** The request comes from our own page: same origin, by every signal the browser gives. */
  const sameSite = (req: Req): boolean => {
    const site = req.headers["sec-fetch-site"];
    if (site !== undefined && site !== "same-origin" && site !== "none") return false;
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    if (origin === "null") return site === "same-origin";
    const host = req.headers.host ?? (req as Http2ServerRequest).authority;
    try {
      return new URL(String(origin)).host === host;
    } catch {
      return false;
    }
  };

  /** Answers a failure of a flow's page: its own words for the errors a person can meet, 500 for the rest. */
  const failOn = async <V extends HostedView>(
    flow: HostedFlow<V>,
    em: Em,
    token: string,
    req: Req,
    res: AnyResponse,
    requestId: string,
    err: unknown,
  ) => {
    if (isApiError(err) && err.code === flow.goneCode) {
      const view = await flow.page(em, token).catch(() => undefined);
      const note = view ? flow.gone(view) : { title: "This link has expired", text: "Ask for a new link." };
      return fail(req, res, requestId, err, message(note));
    }
    if (isApiError(err) && err.code === "not_found")
      return fail(req, res, requestId, err, message(NOT_FOUND));
    if (isApiError(err) && err.code === "rate_limited") {
      const minutes = Math.max(1, Math.ceil((err.retryAfterSeconds ?? 60) / 60));
      return fail(
        req,
        res,
        requestId,
        err,
        message({
          title: "Too many codes",
          text: `For your safety no more codes can be sent for now. Try again in ${minutes} ${minutes === 1 ? "minute" : "minutes"}.`,
        }),
      );
    }
    if (isApiError(err))
      return fail(req, res, requestId, err, message({ title: "Something is not right", text: err.message }));
    logger.error("hosted page failed", { requestId, page: flow.name, err });
    return fail(req, res, requestId, new ApiError("internal"), message(FAILED));
  };

  return {
    /**
     * Serves `GET /prompt/{token}`: opens a prompt session the platform minted for a person it signed in
     * (once), keeps it in a cookie for the page it opens, and sends the browser on to that page. `open`
     * answers the session's id and the page (`consent` or `mandate`, and its token).
     */
    async prompt(
      em: Em,
      req: Req,
      res: AnyResponse,
      requestId: string,
      open: (
        em: Em,
        token: string,
      ) => Promise<{ sessionId: string; page: "consent" | "mandate"; token: string }>,
    ): Promise<void> {
      const token = tokenOf(req, "/prompt/");
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.setHeader("allow", "GET");
        return send(res, 405, message({ title: "Not allowed", text: "Open the link in your app." }));
      }
      try {
        const opened = await open(em, token);
        const secure = (req.headers["x-forwarded-proto"] ?? "") === "https" ? "; Secure" : "";
        res.statusCode = 303;
        // Lax: the dashboard opens this from its own site, and the page it leads to must see the cookie.
        res.setHeader(
          "set-cookie",
          `${opened.page}_session=${opened.sessionId}.${sessionMac(opened.sessionId)}; Path=/${opened.page}; HttpOnly; SameSite=Lax; Max-Age=900${secure}`,
        );
        res.setHeader("location", `/${opened.page}/${encodeURIComponent(opened.token)}`);
        res.setHeader("cache-control", "no-store");
        res.setHeader("referrer-policy", "no-referrer");
        res.setHeader("content-length", 0);
        return void res.end("");
      } catch (err) {
        const expired = message({
          title: "This link has expired",
          text: "Open the request again in your app.",
        });
        if (isApiError(err)) return fail(req, res, requestId, err, expired);
        logger.error("prompt page failed", { requestId, err });
        return fail(req, res, requestId, new ApiError("internal"), message(FAILED));
      }
    },

    /** Serves `GET` and `POST /<flow>/{token}`, on `em`, the request's unit of work. */
    async handle<V extends HostedView>(
      flow: HostedFlow<V>,
      em: Em,
      req: Req,
      res: AnyResponse,
      requestId: string,
    ): Promise<void> {
      const token = tokenOf(req, `/${flow.name}/`);
      const render = renderer(flow);
      try {
        if (req.method === "GET" || req.method === "HEAD") {
          const view = await flow.page(em, token);
          if (view.status !== "PENDING") {
            return fail(req, res, requestId, new ApiError(flow.goneCode), message(flow.gone(view)));
          }
          const nonce = randomBytes(18).toString("base64url");
          const secure = view.url.startsWith("https:") ? "; Secure" : "";
          // Browsers apply form-action to the redirect that follows the post, so the partner's page is allowed.
          // Only a clean host reaches the header (links are checked when made; this holds for older rows too).
          const redirect = view.redirectUrl ? URL.parse(view.redirectUrl) : null;
          const redirectOrigin = redirect && isHostName(redirect.hostname) ? ` ${redirect.origin}` : "";
          const session = sessionOf(req, flow.name);
          const signedIn = session !== undefined && (await flow.sessionFits(em, token, session));
          const page = signedIn ? render.session : render.intro;
          return send(res, 200, page(view, sign(token, nonce), token), {
            "set-cookie": `${flow.name}_csrf=${nonce}; Path=/${flow.name}; HttpOnly; SameSite=Strict; Max-Age=3600${secure}`,
            "content-security-policy": `default-src 'none'; style-src 'unsafe-inline'; form-action 'self'${redirectOrigin}; frame-ancestors 'none'; base-uri 'none'`,
          });
        }
        if (req.method !== "POST") {
          res.setHeader("allow", "GET, POST");
          return send(res, 405, message(NOT_ALLOWED));
        }
        const form = await readForm(req);
        const nonce = cookie(req, `${flow.name}_csrf`);
        const presented = form.get("csrf") ?? "";
        if (!sameSite(req) || !nonce || !constantTimeEqualStrings(presented, sign(token, nonce))) {
          logger.warn("refused a form post that did not come from the hosted page", {
            requestId,
            page: flow.name,
          });
          return fail(
            req,
            res,
            requestId,
            new ApiError("permission_denied", "This form was not sent from the page."),
            message(FORGED),
          );
        }
        const csrf = presented;
        if (form.get("step") === "send") {
          await flow.sendCode(em, token);
          return send(res, 200, render.code(await flow.page(em, token), csrf, token));
        }
        const decision = form.get("decision");
        const shownFor = await flow.page(em, token);
        if (form.get("step") !== "decide" || (decision !== "accept" && decision !== "decline")) {
          const why = `Choose "${flow.acceptLabel(shownFor)}" or "${flow.declineLabel(shownFor)}".`;
          return fail(
            req,
            res,
            requestId,
            new ApiError("invalid_request", why),
            message({ title: "Please choose", text: why }),
          );
        }
        const shown = shownFor;
        const session = sessionOf(req, flow.name);
        const viaSession = session !== undefined && (await flow.sessionFits(em, token, session));
        const context = {
          ip: req.socket?.remoteAddress,
          userAgent: String(req.headers["user-agent"] ?? "").slice(0, 512) || undefined,
          terms: flow.terms(shown),
        };
        const result = viaSession
          ? await flow.decideWithSession(em, token, decision === "accept", session, context)
          : await flow.decide(em, token, decision === "accept", {
              ...context,
              code: (form.get("code") ?? "").trim(),
            });
        if (result.outcome === "not_this_person") {
          return fail(
            req,
            res,
            requestId,
            new ApiError("permission_denied", "This request was sent to another person."),
            message(SOMEONE_ELSE),
          );
        }
        if (result.outcome === "wrong_code" || result.outcome === "code_expired") {
          const problem =
            result.outcome === "wrong_code"
              ? `That code is not right. ${result.triesLeft} ${result.triesLeft === 1 ? "try" : "tries"} left.`
              : "That code has expired or was already used. Send a new code.";
          const err = validationFailed({ code: problem });
          if (wantsJson(req)) return fail(req, res, requestId, err, "");
          return send(res, 422, render.code(shown, csrf, token, problem));
        }
        if (result.outcome === "locked" || result.outcome === "gone" || result.outcome === "no_account") {
          // `no_account` is not reached: a phone with no account never passes the code step. `gone`: the
          // subject ended as it was answered (a mandate accepted after its first due date).
          const now = await flow.page(em, token);
          return fail(
            req,
            res,
            requestId,
            new ApiError(flow.goneCode, undefined, { details: { status: now.status } }),
            message(flow.gone(now)),
          );
        }
        const redirect = shown.redirectUrl;
        if (redirect) {
          const to = new URL(redirect);
          to.searchParams.set("outcome", result.outcome);
          for (const [k, v] of Object.entries(flow.redirectParams(shown))) to.searchParams.set(k, v);
          res.statusCode = 303;
          res.setHeader("location", to.toString());
          res.setHeader("cache-control", "no-store");
          res.setHeader("content-length", 0);
          return void res.end("");
        }
        return send(res, 200, message(flow.done(result.outcome)));
      } catch (err) {
        return failOn(flow, em, token, req, res, requestId, err);
      }
    },
  };
}
