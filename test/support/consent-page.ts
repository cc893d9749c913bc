/** A consent page opened with fetch, as a browser would: the form's hidden field and the cookie it set. */
export interface OpenedPage {
  status: number;
  html: string;
  csrf: string | undefined;
  cookie: string | undefined;
}

/** Opens a consent link's page. */
export async function openPage(url: string): Promise<OpenedPage> {
  const res = await fetch(url, { headers: { accept: "text/html" } });
  const html = await res.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  const cookie = res.headers.get("set-cookie")?.split(";")[0];
  return { status: res.status, html, csrf, cookie };
}

/** Posts the page's form, from the page itself unless told otherwise. */
export async function submit(
  url: string,
  page: OpenedPage,
  decision: "accept" | "decline",
  options: { origin?: string; omitCookie?: boolean; csrf?: string; accept?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    origin: options.origin ?? new URL(url).origin,
    accept: options.accept ?? "text/html",
  };
  if (!options.omitCookie && page.cookie) headers.cookie = page.cookie;
  const body = new URLSearchParams({ csrf: options.csrf ?? page.csrf ?? "", decision }).toString();
  return fetch(url, { method: "POST", headers, body, redirect: "manual" });
}
