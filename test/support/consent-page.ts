import { SANDBOX_CODE } from "../../src/person/person.service.ts";

/** A consent page opened with fetch, as a browser would: the form's hidden field and the cookie it set. */
export interface OpenedPage {
  status: number;
  html: string;
  csrf: string | undefined;
  cookie: string | undefined;
}

/** How a form is posted: from the page itself unless told otherwise. */
export interface PostOptions {
  origin?: string;
  omitCookie?: boolean;
  csrf?: string;
  accept?: string;
}

/** Opens a consent link's page. */
export async function openPage(url: string): Promise<OpenedPage> {
  const res = await fetch(url, { headers: { accept: "text/html" } });
  const html = await res.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  const cookie = res.headers.get("set-cookie")?.split(";")[0];
  return { status: res.status, html, csrf, cookie };
}

/** Posts one of the page's forms. */
function post(url: string, page: OpenedPage, fields: Record<string, string>, options: PostOptions) {
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    origin: options.origin ?? new URL(url).origin,
    accept: options.accept ?? "text/html",
  };
  if (!options.omitCookie && page.cookie) headers.cookie = page.cookie;
  const body = new URLSearchParams({ csrf: options.csrf ?? page.csrf ?? "", ...fields }).toString();
  return fetch(url, { method: "POST", headers, body, redirect: "manual" });
}

/** Presses "Text me a code" (or "Send a new code"). */
export function requestCode(url: string, page: OpenedPage, options: PostOptions = {}): Promise<Response> {
  return post(url, page, { step: "send" }, options);
}

/**
 * Posts the person's decision with a code. Without `code`, asks for one first and gives the sandbox's fixed
 * code, as a person in the sandbox would (an answer other than 200 to the request for a code is returned).
 */
export async function submit(
  url: string,
  page: OpenedPage,
  decision: "accept" | "decline",
  options: PostOptions & { code?: string } = {},
): Promise<Response> {
  if (options.code === undefined) {
    const sent = await requestCode(url, page, options);
    if (sent.status !== 200) return sent;
  }
  return post(url, page, { step: "decide", decision, code: options.code ?? SANDBOX_CODE }, options);
}
