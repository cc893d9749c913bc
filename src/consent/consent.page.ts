import { createHmac, randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { SANDBOX_CODE } from "../person/person.service.ts";
import { constantTimeEqualStrings } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, isApiError, validationFailed } from "../platform/errors.ts";
import type { AnyResponse } from "../platform/http/rest-errors.ts";
import { restErrorBody } from "../platform/http/rest-errors.ts";
import type { Logger } from "../platform/logger.ts";
import type { ConsentLinkService, LinkView, PageView } from "./consent-link.service.ts";
import { describeScope, isScope } from "./scopes.ts";

type Req = IncomingMessage | Http2ServerRequest;

/** Options for {@link createConsentPages}. */
export interface ConsentPagesOptions {
  links: ConsentLinkService;
  /** Key of the anti-forgery tokens (derived from the master key). */
  csrfKey: Buffer;
  logger: Logger;
}

const CSRF_COOKIE = "consent_csrf";
/** The opened prompt session of a person the platform signed in: `<session id>.<HMAC>`. */
const SESSION_COOKIE = "consent_session";
const MAX_FORM_BYTES = 4096;

const escapeHtml = (s: string) =>
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

/**
 * The terms as the page shows them. Deterministic from the link, so the text hashed into the consent's
 * evidence is exactly what the person saw.
 */
export function termsBlock(view: PageView): string {
  const { link, partnerName } = view;
  const name = escapeHtml(partnerName);
  const items = link.scopes
    .filter(isScope)
    .map((s) => `<li>${escapeHtml(describeScope(s, link.maxLedgerWindowDays))}</li>`)
    .join("\n");
  return `<h1>${name} asks to see some of your information</h1>
<p>${name} will use it to decide on a loan for you. You can withdraw this permission at any time in your app.</p>
<h2>What ${name} will see</h2>
<ul>
${items}
</ul>
<h2>For how long</h2>
<p>Figures cover up to the last ${link.maxLedgerWindowDays} days (usually ${link.ledgerWindowDays}). Your permission lasts one year unless you withdraw it sooner.</p>
<p class="muted">${name} never sees your individual transactions, who you pay or who pays you, your account numbers, BVN, NIN, location or messages. This link ends in ${escapeHtml(link.phoneLast4)} and expires ${escapeHtml(link.expiresAt.toUTCString())}.</p>`;
}

/** The sandbox's note: where no text is sent, the fixed code is shown. */
const sandboxNote = (view: PageView) =>
  view.environment === "sandbox"
    ? `<p class="note">Sandbox: no text message is sent. The code is <strong>${SANDBOX_CODE}</strong>.</p>`
    : "";

/** First step: the terms, and a button that texts the person a code. Nothing can be decided yet. */
function introPage(view: PageView, csrf: string, token: string): string {
  return layout(
    `${view.partnerName} asks to see your information`,
    `${termsBlock(view)}
<h2>First, check it is you</h2>
<p>We will text a 6-digit code to your phone number ending in ${escapeHtml(view.link.phoneLast4)}.</p>
${sandboxNote(view)}
<form method="post" action="/consent/${escapeHtml(token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<div class="actions">
<button class="accept" type="submit" name="step" value="send">Text me a code</button>
</div>
</form>`,
  );
}

/** For a person the platform signed in (a prompt session): the terms and the decision, no code. */
function sessionPage(view: PageView, csrf: string, token: string): string {
  return layout(
    `${view.partnerName} asks to see your information`,
    `${termsBlock(view)}
<p class="note">You are signed in to your account, so no code is needed.</p>
<form method="post" action="/consent/${escapeHtml(token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<input type="hidden" name="step" value="decide">
<div class="actions">
<button class="accept" type="submit" name="decision" value="accept">Allow ${escapeHtml(view.partnerName)} to see this</button>
<button class="decline" type="submit" name="decision" value="decline">Don't allow</button>
</div>
</form>`,
  );
}

/** Second step: the code the person was texted, and their decision. */
function codePage(view: PageView, csrf: string, token: string, problem?: string): string {
  const error = problem ? `<p class="error" id="code-error" role="alert">${escapeHtml(problem)}</p>` : "";
  return layout(
    `${view.partnerName} asks to see your information`,
    `${termsBlock(view)}
<h2>Enter the code we texted you</h2>
<p>We sent a 6-digit code to your phone number ending in ${escapeHtml(view.link.phoneLast4)}. It works for 10 minutes.</p>
${sandboxNote(view)}
<form method="post" action="/consent/${escapeHtml(token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<input type="hidden" name="step" value="decide">
<label for="code">Code</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required${problem ? ' aria-invalid="true" aria-describedby="code-error"' : ""}>
${error}
<div class="actions">
<button class="accept" type="submit" name="decision" value="accept">Allow ${escapeHtml(view.partnerName)} to see this</button>
<button class="decline" type="submit" name="decision" value="decline">Don't allow</button>
</div>
</form>
<form method="post" action="/consent/${escapeHtml(token)}" class="resend">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button class="link" type="submit" name="step" value="send">Send a new code</button>
</form>`,
  );
}

function message(title: string, text: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(text)}</p>`);
}

function gonePage(link: LinkView): string {
  switch (link.status) {
    case "ACCEPTED":
      return message("This link has already been used", "You already allowed this. Nothing more to do here.");
    case "DECLINED":
      return message(
        "This link has already been used",
        "You chose not to allow this. The link cannot be used again.",
      );
    case "LOCKED":
      return message(
        "This link is locked",
        "Too many wrong codes were entered. For your safety it cannot be used again: ask the lender for a new link.",
      );
    default:
      return message("This link has expired", "Ask the lender to send you a new link.");
  }
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

/**
 * The hosted consent page: server-rendered HTML that works without JavaScript, fits a small phone screen,
 * and refuses cross-site form posts (a SameSite=Strict cookie whose value the form must echo, signed with
 * the link's token, and Origin / Sec-Fetch-Site checks).
 */
export function createConsentPages({ links, csrfKey, logger }: ConsentPagesOptions) {
  const sign = (token: string, nonce: string) =>
    createHmac("sha256", csrfKey).update(`${token}.${nonce}`).digest("hex");
  const sessionMac = (id: string) => createHmac("sha256", csrfKey).update(`session.${id}`).digest("hex");
  /** The prompt session the browser holds, when its cookie is ours. */
  const sessionOf = (req: Req): string | undefined => {
    const [id, mac] = (cookie(req, SESSION_COOKIE) ?? "").split(".");
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

  return {
    /**
     * Serves `GET /prompt/{token}`: opens a prompt session the platform minted for a person it signed in
     * (once), keeps it in a cookie, and sends the browser on to the consent link's page.
     */
    async prompt(em: Em, req: Req, res: AnyResponse, requestId: string): Promise<void> {
      const token = tokenOf(req, "/prompt/");
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.setHeader("allow", "GET");
        return send(res, 405, message("Not allowed", "Open the link in your app."));
      }
      try {
        const opened = await links.openPrompt(em, token);
        const secure = (req.headers["x-forwarded-proto"] ?? "") === "https" ? "; Secure" : "";
        res.statusCode = 303;
        // Lax: the dashboard opens this from its own site, and the page it leads to must see the cookie.
        res.setHeader(
          "set-cookie",
          `${SESSION_COOKIE}=${opened.sessionId}.${sessionMac(opened.sessionId)}; Path=/consent; HttpOnly; SameSite=Lax; Max-Age=900${secure}`,
        );
        res.setHeader("location", `/consent/${encodeURIComponent(opened.linkToken)}`);
        res.setHeader("cache-control", "no-store");
        res.setHeader("referrer-policy", "no-referrer");
        res.setHeader("content-length", 0);
        return void res.end("");
      } catch (err) {
        if (isApiError(err))
          return fail(
            req,
            res,
            requestId,
            err,
            message("This link has expired", "Open the request again in your app."),
          );
        logger.error("prompt page failed", { requestId, err });
        return fail(
          req,
          res,
          requestId,
          new ApiError("internal"),
          message("Something went wrong", "Please try again in a moment."),
        );
      }
    },

    /** Serves `GET` and `POST /consent/{token}`, on `em`, the request's unit of work. */
    async handle(em: Em, req: Req, res: AnyResponse, requestId: string): Promise<void> {
      const token = tokenOf(req, "/consent/");
      try {
        if (req.method === "GET" || req.method === "HEAD") {
          const view = await links.page(em, token);
          if (view.link.status !== "PENDING") {
            return fail(req, res, requestId, new ApiError("consent_link_gone"), gonePage(view.link));
          }
          const nonce = randomBytes(18).toString("base64url");
          const secure = view.link.url.startsWith("https:") ? "; Secure" : "";
          // Browsers apply form-action to the redirect that follows the post, so the partner's page is allowed.
          const redirectOrigin = view.link.redirectUrl ? ` ${new URL(view.link.redirectUrl).origin}` : "";
          const session = sessionOf(req);
          const signedIn = session !== undefined && (await links.sessionFits(em, token, session));
          const page = signedIn ? sessionPage : introPage;
          return send(res, 200, page(view, sign(token, nonce), token), {
            "set-cookie": `${CSRF_COOKIE}=${nonce}; Path=/consent; HttpOnly; SameSite=Strict; Max-Age=3600${secure}`,
            "content-security-policy": `default-src 'none'; style-src 'unsafe-inline'; form-action 'self'${redirectOrigin}; frame-ancestors 'none'; base-uri 'none'`,
          });
        }
        if (req.method !== "POST") {
          res.setHeader("allow", "GET, POST");
          return send(res, 405, message("Not allowed", "Open the link in your browser."));
        }
        const form = await readForm(req);
        const nonce = cookie(req, CSRF_COOKIE);
        const presented = form.get("csrf") ?? "";
        if (!sameSite(req) || !nonce || !constantTimeEqualStrings(presented, sign(token, nonce))) {
          logger.warn("refused a consent form post that did not come from the consent page", { requestId });
          return fail(
            req,
            res,
            requestId,
            new ApiError("permission_denied", "This form was not sent from the consent page."),
            message(
              "Please open the link again",
              "For your safety this request was refused. Open the link from your messages and try again.",
            ),
          );
        }
        const csrf = presented;
        if (form.get("step") === "send") {
          await links.sendCode(em, token);
          return send(res, 200, codePage(await links.page(em, token), csrf, token));
        }
        const decision = form.get("decision");
        if (form.get("step") !== "decide" || (decision !== "accept" && decision !== "decline")) {
          return fail(
            req,
            res,
            requestId,
            new ApiError("invalid_request", "Choose allow or don't allow."),
            message("Please choose", "Choose allow or don't allow."),
          );
        }
        const shown = await links.page(em, token);
        const session = sessionOf(req);
        const viaSession = session !== undefined && (await links.sessionFits(em, token, session));
        const result = viaSession
          ? await links.decideWithSession(em, token, decision === "accept", session, {
              ip: req.socket?.remoteAddress,
              userAgent: String(req.headers["user-agent"] ?? "").slice(0, 512) || undefined,
              terms: termsBlock(shown),
            })
          : await links.decide(em, token, decision === "accept", {
              code: (form.get("code") ?? "").trim(),
              ip: req.socket?.remoteAddress,
              userAgent: String(req.headers["user-agent"] ?? "").slice(0, 512) || undefined,
              terms: termsBlock(shown),
            });
        if (result.outcome === "not_this_person") {
          return fail(
            req,
            res,
            requestId,
            new ApiError("permission_denied", "This request was sent to another person."),
            message(
              "This request is for someone else",
              "It was sent to another phone number than the one on your account, so you cannot answer it.",
            ),
          );
        }
        if (result.outcome === "wrong_code" || result.outcome === "code_expired") {
          const problem =
            result.outcome === "wrong_code"
              ? `That code is not right. ${result.triesLeft} ${result.triesLeft === 1 ? "try" : "tries"} left.`
              : "That code has expired or was already used. Send a new code.";
          const err = validationFailed({ code: problem });
          if (wantsJson(req)) return fail(req, res, requestId, err, "");
          return send(res, 422, codePage(shown, csrf, token, problem));
        }
        if (result.outcome === "locked") {
          return fail(
            req,
            res,
            requestId,
            new ApiError("consent_link_gone", undefined, { details: { status: "LOCKED" } }),
            gonePage(result.link),
          );
        }
        if (result.outcome === "no_account") {
          // Not reached: a phone with no account never passes the code step.
          return fail(req, res, requestId, new ApiError("consent_link_gone"), gonePage(result.link));
        }
        const redirect = result.link.redirectUrl;
        if (redirect) {
          const to = new URL(redirect);
          to.searchParams.set("outcome", result.outcome);
          to.searchParams.set("consent_link_id", result.link.id);
          res.statusCode = 303;
          res.setHeader("location", to.toString());
          res.setHeader("cache-control", "no-store");
          res.setHeader("content-length", 0);
          return void res.end("");
        }
        return send(
          res,
          200,
          result.outcome === "accepted"
            ? message(
                "Thank you",
                "You allowed the lender to see the information listed. You can withdraw this at any time in your app.",
              )
            : message("Done", "You chose not to allow this. The lender will not see your information."),
        );
      } catch (err) {
        if (isApiError(err) && err.code === "consent_link_gone") {
          const view = await links.page(em, token).catch(() => undefined);
          return fail(
            req,
            res,
            requestId,
            err,
            view
              ? gonePage(view.link)
              : message("This link has expired", "Ask the lender to send you a new link."),
          );
        }
        if (isApiError(err) && err.code === "not_found") {
          return fail(
            req,
            res,
            requestId,
            err,
            message("Link not found", "Check that you opened the whole link from your messages."),
          );
        }
        if (isApiError(err) && err.code === "rate_limited") {
          const minutes = Math.max(1, Math.ceil((err.retryAfterSeconds ?? 60) / 60));
          return fail(
            req,
            res,
            requestId,
            err,
            message(
              "Too many codes",
              `For your safety no more codes can be sent for now. Try again in ${minutes} ${minutes === 1 ? "minute" : "minutes"}.`,
            ),
          );
        }
        if (isApiError(err))
          return fail(req, res, requestId, err, message("Something is not right", err.message));
        logger.error("consent page failed", { requestId, err });
        return fail(
          req,
          res,
          requestId,
          new ApiError("internal"),
          message("Something went wrong", "Please try again in a moment."),
        );
      }
    },
  };
}
