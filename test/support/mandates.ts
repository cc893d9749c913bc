import { rest } from "./clients.ts";

/**
 * The person accepts a disbursement's repayment mandate, as tests of what follows acceptance need: in the
 * sandbox through the sandbox helper (which acts for the person); in production through a prompt session the
 * platform mints for the signed-in user (`internal.v1.ConsentAdminService/CreatePromptSession`), opened and
 * answered on the hosted mandate page as a browser would. Nothing happens for a disbursement that is not
 * AWAITING_ACCEPTANCE. Answers the disbursement as `GET` shows it afterwards.
 */
export async function acceptMandate(
  t: {
    partnerUrl: string;
    internal: {
      consents: {
        createPromptSession(req: {
          userId: string;
          disbursementId?: string;
          expiresInSeconds?: number;
        }): Promise<{ url: string }>;
      };
    };
  },
  key: string,
  id: string,
): Promise<any> {
  // A GET that is not answered (a 503 while the database is away) throws, so the caller tries again: its error body
  // has no status, and must never read as "no longer awaiting acceptance".
  const get = async () => {
    const res = await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}`, { key });
    if (res.status !== 200) throw new Error(`GET disbursement answered ${res.status}`);
    return res.body;
  };
  const d = await get();
  if (d.status !== "AWAITING_ACCEPTANCE") return d;
  // Another caller accepting the same mandate at the same time is not a failure: the person accepted once.
  const acceptedMeanwhile = async (status: number) => {
    const now = await get();
    if (status === 410 && now.status !== "AWAITING_ACCEPTANCE" && now.status !== "CANCELLED") return now;
    throw new Error(`the mandate was answered ${status}; the disbursement is ${now.status}`);
  };
  if (key.startsWith("sk_sandbox_")) {
    const res = await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/disbursements/${id}/accept`, { key });
    return res.status === 200 ? res.body : acceptedMeanwhile(res.status);
  }
  const prompt = await t.internal.consents
    .createPromptSession({ userId: d.userId, disbursementId: id })
    .catch(() => undefined);
  if (!prompt) return acceptedMeanwhile(410);
  const { url } = prompt;
  const opened = await fetch(url, { redirect: "manual" });
  const session = opened.headers.get("set-cookie")?.split(";")[0];
  const location = opened.headers.get("location");
  if (opened.status !== 303 || !session || !location) throw new Error(`prompt answered ${opened.status}`);
  const pageUrl = new URL(location, url).toString();
  const page = await fetch(pageUrl, { headers: { accept: "text/html", cookie: session } });
  // Answered between the check above and this page: it shows the "already answered" page (410) and no form,
  // so there is nothing to post (a post without the page's form would be refused as forged, 403).
  if (page.status === 410) return acceptedMeanwhile(410);
  const html = await page.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";
  const csrfCookie = page.headers.get("set-cookie")?.split(";")[0] ?? "";
  const answer = await fetch(pageUrl, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      origin: new URL(pageUrl).origin,
      accept: "text/html",
      cookie: `${session}; ${csrfCookie}`,
    },
    body: new URLSearchParams({ csrf, step: "decide", decision: "accept" }).toString(),
  });
  if (answer.status !== 200 && answer.status !== 303) return acceptedMeanwhile(answer.status);
  return get();
}
