import { createHmac, randomBytes } from "node:crypto";
import { secretKeyOf } from "../platform/crypto/keys.ts";
import { constantTimeEqualStrings } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, isApiError, validationFailed } from "../platform/errors.ts";
import { isHostName } from "../platform/hostname.ts";
import { clientAddressOf } from "../platform/http/client-address.ts";
import type { AnyResponse } from "../platform/http/rest-errors.ts";
import type { Logger } from "../platform/logger.ts";
import type { HostedFlow, HostedOutcome, HostedView } from "./hosted-flow.ts";
import {
  codePage,
  FAILED,
  FORGED,
  introPage,
  message,
  NOT_ALLOWED,
  NOT_FOUND,
  SOMEONE_ELSE,
  sessionPage,
  UNAVAILABLE,
} from "./page-html.ts";
import {
  cookie,
  type Req,
  readForm,
  sameSite,
  sendError,
  sendHtml,
  tokenOf,
  unavailableError,
  wantsJson,
} from "./page-http.ts";

/** Options for {@link createHostedPages}. */
export interface HostedPagesOptions {
  /** Key of the anti-forgery tokens and session cookies (derived from the master key). */
  csrfKey: Buffer;
  logger: Logger;
}

/** What the pages hold for every request: their keys and their logger. */
interface Pages {
  /** The anti-forgery token of a page's form: bound to the page's token and the nonce in its cookie. */
  sign(token: string, nonce: string): string;
  /** The MAC that makes a prompt session's cookie ours. */
  sessionMac(id: string): string;
  logger: Logger;
}

/** One request to a flow's page, on `em`, the request's unit of work. */
interface Exchange {
  em: Em;
  req: Req;
  res: AnyResponse;
  requestId: string;
  /** The page's token, from its path. */
  token: string;
}

/** The prompt session the browser holds for this flow, when its cookie is ours. */
function sessionOf(pages: Pages, req: Req, name: string): string | undefined {
  const [id, mac] = (cookie(req, `${name}_session`) ?? "").split(".");
  return id && mac && constantTimeEqualStrings(mac, pages.sessionMac(id)) ? id : undefined;
}

/** The opened prompt session of this page, if it may still answer the page's subject. */
async function fittingSession<V extends HostedView>(pages: Pages, flow: HostedFlow<V>, x: Exchange) {
  const session = sessionOf(pages, x.req, flow.name);
  return session !== undefined && (await flow.sessionFits(x.em, x.token, session)) ? session : undefined;
}

/** Answers a failure of a flow's page: its own words for the errors a person can meet, 500 for the rest. */
async function failOn<V extends HostedView>(pages: Pages, flow: HostedFlow<V>, x: Exchange, err: unknown) {
  const { req, res, requestId } = x;
  if (isApiError(err) && err.code === flow.goneCode) {
    const view = await flow.page(x.em, x.token).catch(() => undefined);
    const note = view ? flow.gone(view) : { title: "This link has expired", text: "Ask for a new link." };
    return sendError(req, res, requestId, err, message(note));
  }
  if (isApiError(err) && err.code === "not_found")
    return sendError(req, res, requestId, err, message(NOT_FOUND));
  if (isApiError(err) && err.code === "rate_limited") {
    const minutes = Math.max(1, Math.ceil((err.retryAfterSeconds ?? 60) / 60));
    const text = `For your safety no more codes can be sent for now. Try again in ${minutes} ${minutes === 1 ? "minute" : "minutes"}.`;
    return sendError(req, res, requestId, err, message({ title: "Too many codes", text }));
  }
  if (isApiError(err))
    return sendError(
      req,
      res,
      requestId,
      err,
      message({ title: "Something is not right", text: err.message }),
    );
  const away = unavailableError(err);
  if (away) {
    pages.logger.warn("hosted page unavailable", { requestId, page: flow.name, err: (err as Error).message });
    return sendError(req, res, requestId, away, message(UNAVAILABLE));
  }
  pages.logger.error("hosted page failed", { requestId, page: flow.name, err });
  return sendError(req, res, requestId, new ApiError("internal"), message(FAILED));
}

/**
 * `GET /<flow>/{token}`: the page of a subject that may still be answered, with a fresh anti-forgery nonce in
 * a SameSite=Strict cookie; the flow's "gone" page (410) once it cannot.
 */
async function showPage<V extends HostedView>(pages: Pages, flow: HostedFlow<V>, x: Exchange) {
  const view = await flow.page(x.em, x.token);
  if (view.status !== "PENDING") {
    return sendError(x.req, x.res, x.requestId, new ApiError(flow.goneCode), message(flow.gone(view)));
  }
  const nonce = randomBytes(18).toString("base64url");
  const secure = view.url.startsWith("https:") ? "; Secure" : "";
  // Browsers apply form-action to the redirect that follows the post, so the partner's page is allowed.
  // Only a clean host reaches the header (links are checked when made; this holds for older rows too).
  const redirect = view.redirectUrl ? URL.parse(view.redirectUrl) : null;
  const redirectOrigin = redirect && isHostName(redirect.hostname) ? ` ${redirect.origin}` : "";
  const signedIn = (await fittingSession(pages, flow, x)) !== undefined;
  const page = signedIn ? sessionPage : introPage;
  return sendHtml(x.res, 200, page(flow, view, pages.sign(x.token, nonce), x.token), {
    "set-cookie": `${flow.name}_csrf=${nonce}; Path=/${flow.name}; HttpOnly; SameSite=Strict; Max-Age=3600${secure}`,
    "content-security-policy": `default-src 'none'; style-src 'unsafe-inline'; form-action 'self'${redirectOrigin}; frame-ancestors 'none'; base-uri 'none'`,
  });
}

/** The form's anti-forgery token, when the post came from the page itself; undefined for anything else. */
function genuineCsrf<V extends HostedView>(
  pages: Pages,
  flow: HostedFlow<V>,
  x: Exchange,
  form: URLSearchParams,
) {
  const nonce = cookie(x.req, `${flow.name}_csrf`);
  const presented = form.get("csrf") ?? "";
  if (!sameSite(x.req) || !nonce || !constantTimeEqualStrings(presented, pages.sign(x.token, nonce)))
    return undefined;
  return presented;
}

/** The person's decision, through their prompt session when it fits this page, else with the code they typed. */
async function decideOn<V extends HostedView>(
  pages: Pages,
  flow: HostedFlow<V>,
  x: Exchange,
  shown: V,
  accept: boolean,
  form: URLSearchParams,
): Promise<HostedOutcome> {
  const session = await fittingSession(pages, flow, x);
  const context = {
    ip: clientAddressOf(x.req) || undefined,
    userAgent: String(x.req.headers["user-agent"] ?? "").slice(0, 512) || undefined,
    terms: flow.terms(shown),
  };
  return session !== undefined
    ? flow.decideWithSession(x.em, x.token, accept, session, context)
    : flow.decide(x.em, x.token, accept, { ...context, code: (form.get("code") ?? "").trim() });
}

/** Answers a decision: back to the code step on a wrong code, the "gone" page, the partner, or "done". */
async function answerOutcome<V extends HostedView>(
  flow: HostedFlow<V>,
  x: Exchange,
  shown: V,
  csrf: string,
  result: HostedOutcome,
) {
  const { req, res, requestId } = x;
  if (result.outcome === "not_this_person") {
    const err = new ApiError("permission_denied", "This request was sent to another person.");
    return sendError(req, res, requestId, err, message(SOMEONE_ELSE));
  }
  if (result.outcome === "wrong_code" || result.outcome === "code_expired") {
    const problem =
      result.outcome === "wrong_code"
        ? `That code is not right. ${result.triesLeft} ${result.triesLeft === 1 ? "try" : "tries"} left.`
        : "That code has expired or was already used. Send a new code.";
    if (wantsJson(req)) return sendError(req, res, requestId, validationFailed({ code: problem }), "");
    return sendHtml(res, 422, codePage(flow, shown, csrf, x.token, problem));
  }
  if (result.outcome === "locked" || result.outcome === "gone" || result.outcome === "no_account") {
    // `no_account` is not reached: a phone with no account never passes the code step. `gone`: the
    // subject ended as it was answered (a mandate accepted after its first due date).
    const now = await flow.page(x.em, x.token);
    const err = new ApiError(flow.goneCode, undefined, { details: { status: now.status } });
    return sendError(req, res, requestId, err, message(flow.gone(now)));
  }
  if (shown.redirectUrl) {
    const to = new URL(shown.redirectUrl);
    to.searchParams.set("outcome", result.outcome);
    for (const [k, v] of Object.entries(flow.redirectParams(shown))) to.searchParams.set(k, v);
    res.statusCode = 303;
    res.setHeader("location", to.toString());
    res.setHeader("cache-control", "no-store");
    res.setHeader("content-length", 0);
    return void res.end("");
  }
  return sendHtml(res, 200, message(flow.done(result.outcome)));
}

/**
 * `POST /<flow>/{token}`: refused unless it came from the page (403); `step=send` texts a code and shows the
 * code step; `step=decide` decides, once the person proved who they are.
 */
async function answerForm<V extends HostedView>(pages: Pages, flow: HostedFlow<V>, x: Exchange) {
  const form = await readForm(x.req);
  const csrf = genuineCsrf(pages, flow, x, form);
  if (csrf === undefined) {
    pages.logger.warn("refused a form post that did not come from the hosted page", {
      requestId: x.requestId,
      page: flow.name,
    });
    const err = new ApiError("permission_denied", "This form was not sent from the page.");
    return sendError(x.req, x.res, x.requestId, err, message(FORGED));
  }
  if (form.get("step") === "send") {
    await flow.sendCode(x.em, x.token);
    return sendHtml(x.res, 200, codePage(flow, await flow.page(x.em, x.token), csrf, x.token));
  }
  const decision = form.get("decision");
  const shown = await flow.page(x.em, x.token);
  if (form.get("step") !== "decide" || (decision !== "accept" && decision !== "decline")) {
    const why = `Choose "${flow.acceptLabel(shown)}" or "${flow.declineLabel(shown)}".`;
    const err = new ApiError("invalid_request", why);
    return sendError(x.req, x.res, x.requestId, err, message({ title: "Please choose", text: why }));
  }
  const result = await decideOn(pages, flow, x, shown, decision === "accept", form);
  return answerOutcome(flow, x, shown, csrf, result);
}

/** What a prompt session's URL opens: the session, and the page it leads to. */
type OpenPrompt = (
  em: Em,
  token: string,
) => Promise<{ sessionId: string; page: "consent" | "mandate"; token: string }>;

/** `GET /prompt/{token}`: see {@link HostedPages.prompt}. */
async function openPrompt(pages: Pages, x: Exchange, open: OpenPrompt): Promise<void> {
  const { req, res, requestId } = x;
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET");
    return sendHtml(res, 405, message({ title: "Not allowed", text: "Open the link in your app." }));
  }
  try {
    const opened = await open(x.em, x.token);
    const secure = (req.headers["x-forwarded-proto"] ?? "") === "https" ? "; Secure" : "";
    res.statusCode = 303;
    // Lax: the dashboard opens this from its own site, and the page it leads to must see the cookie.
    res.setHeader(
      "set-cookie",
      `${opened.page}_session=${opened.sessionId}.${pages.sessionMac(opened.sessionId)}; Path=/${opened.page}; HttpOnly; SameSite=Lax; Max-Age=900${secure}`,
    );
    res.setHeader("location", `/${opened.page}/${encodeURIComponent(opened.token)}`);
    res.setHeader("cache-control", "no-store");
    res.setHeader("referrer-policy", "no-referrer");
    res.setHeader("content-length", 0);
    return void res.end("");
  } catch (err) {
    const expired = message({ title: "This link has expired", text: "Open the request again in your app." });
    if (isApiError(err)) return sendError(req, res, requestId, err, expired);
    const away = unavailableError(err);
    if (away) {
      pages.logger.warn("prompt page unavailable", { requestId, err: (err as Error).message });
      return sendError(req, res, requestId, away, message(UNAVAILABLE));
    }
    pages.logger.error("prompt page failed", { requestId, err });
    return sendError(req, res, requestId, new ApiError("internal"), message(FAILED));
  }
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
  const pages: Pages = {
    sign: (token, nonce) =>
      createHmac("sha256", secretKeyOf(csrfKey)).update(`${token}.${nonce}`).digest("hex"),
    sessionMac: (id) => createHmac("sha256", secretKeyOf(csrfKey)).update(`session.${id}`).digest("hex"),
    logger,
  };
  return {
    /**
     * Serves `GET /prompt/{token}`: opens a prompt session the platform minted for a person it signed in
     * (once), keeps it in a cookie for the page it opens, and sends the browser on to that page. `open`
     * answers the session's id and the page (`consent` or `mandate`, and its token).
     */
    prompt(em: Em, req: Req, res: AnyResponse, requestId: string, open: OpenPrompt): Promise<void> {
      return openPrompt(pages, { em, req, res, requestId, token: tokenOf(req, "/prompt/") }, open);
    },

    /** Serves `GET` and `POST /<flow>/{token}`, on `em`, the request's unit of work. */
    async handle<V extends HostedView>(
      flow: HostedFlow<V>,
      em: Em,
      req: Req,
      res: AnyResponse,
      requestId: string,
    ): Promise<void> {
      const x: Exchange = { em, req, res, requestId, token: tokenOf(req, `/${flow.name}/`) };
      try {
        if (req.method === "GET" || req.method === "HEAD") return await showPage(pages, flow, x);
        if (req.method !== "POST") {
          res.setHeader("allow", "GET, POST");
          return sendHtml(res, 405, message(NOT_ALLOWED));
        }
        return await answerForm(pages, flow, x);
      } catch (err) {
        return failOn(pages, flow, x, err);
      }
    },
  };
}
