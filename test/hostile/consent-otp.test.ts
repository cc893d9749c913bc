import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { type OpenedPage, openPage, requestCode, submit } from "../support/consent-page.ts";
import { type FakeSms, startFakeSms } from "../support/fake-sms.ts";
import { eventually } from "../support/wait.ts";

// A partner holding a consent link's URL tries to grant itself the consent, in production, where the code
// goes by SMS (a local Termii-style provider) to the number the platform holds for the person.
const clock = new ManualClock(Date.now());
let t: TestApp;
let sms: FakeSms;
let a: PartnerFixture;
const logs: string[] = [];

beforeAll(async () => {
  sms = await startFakeSms();
  t = await startTestApp({
    clock,
    config: { smsProvider: { baseUrl: sms.url, apiKey: sms.apiKey, senderId: "Platform", timeoutMs: 5_000 } },
    onLog: (line) => logs.push(line),
  });
  a = await createPartner(t, "Hostile Lending");
});
afterAll(async () => {
  await t?.stop();
  await sms?.close();
});

const newLink = async (phoneNumber: string) => {
  const res = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
    key: a.liveKey,
    body: { phoneNumber, scopes: ["standing", "kyc"], ledgerWindowDays: 30 },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { id: string; url: string };
};
const linkStatus = async (id: string) =>
  (await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${id}`, { key: a.liveKey })).body.status;
const consentOf = async (userId: string) =>
  (await rest(t.partnerUrl, "GET", `/partner/v1/users/${userId}/consent`, { key: a.liveKey })).status;
/** The code texted to a number, once the provider has it. */
const textedCode = (phoneNumber: string, after: number) =>
  eventually(() => (sms.texts.length > after ? sms.lastCode(phoneNumber) : undefined), {
    what: "the texted code",
  });

describe("the consent page without the person's code", () => {
  it("holding the URL, a valid anti-forgery token and the page's own cookie write no consent", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const page = await openPage(link.url);
    expect(page.status).toBe(200);
    expect(page.html).not.toMatch(/value="accept"/);
    // Straight to a decision, with no code, an empty code and a made-up one: nothing is written.
    for (const code of ["", "123456"]) {
      const res = await submit(link.url, page, "accept", { code });
      expect(res.status).toBe(422);
    }
    expect(await linkStatus(link.id)).toBe("PENDING");
    expect(await consentOf(u.userId)).toBe(404);
  });

  it("texts the code to the number the platform holds, and only the right code grants", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const page = await openPage(link.url);
    const before = sms.texts.length;
    expect((await requestCode(link.url, page)).status).toBe(200);
    const code = await textedCode(u.phoneNumber, before);
    expect(code).toMatch(/^\d{6}$/);
    expect(sms.texts.at(-1)).toMatchObject({ to: u.phoneNumber.slice(1), from: "Platform", channel: "dnd" });
    expect(sms.texts.at(-1)?.sms).toContain("Hostile Lending");
    const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, "0");
    expect((await submit(link.url, page, "accept", { code: wrong })).status).toBe(422);
    expect(await linkStatus(link.id)).toBe("PENDING");
    const ok = await submit(link.url, page, "accept", { code });
    expect(ok.status).toBe(200);
    expect(await linkStatus(link.id)).toBe("ACCEPTED");
    const consent = await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, {
      key: a.liveKey,
    });
    expect(consent.body).toMatchObject({
      status: "ACTIVE",
      authentication: { method: "OTP_SMS", at: expect.any(String) },
    });
    // The evidence the partner never sees stays out of its answer.
    expect(JSON.stringify(consent.body)).not.toMatch(/127\.0\.0\.1|userAgent|termsHash|evidence/i);
    // The codes never reach the logs.
    expect(logs.join("\n")).not.toContain(code);
    expect(logs.join("\n")).not.toContain(wrong);
  });

  it("a wrong code five times locks the link, even for the right code after", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const page = await openPage(link.url);
    const before = sms.texts.length;
    await requestCode(link.url, page);
    const code = await textedCode(u.phoneNumber, before);
    const wrong = String((Number(code) + 7) % 1_000_000).padStart(6, "0");
    const answers: number[] = [];
    for (let i = 0; i < 5; i++)
      answers.push((await submit(link.url, page, "accept", { code: wrong })).status);
    expect(answers).toEqual([422, 422, 422, 422, 410]);
    expect(await linkStatus(link.id)).toBe("LOCKED");
    const right = await submit(link.url, page, "accept", { code, accept: "application/json" });
    expect(right.status).toBe(410);
    expect((await right.json()).code).toBe("consent_link_gone");
    expect((await requestCode(link.url, page)).status).toBe(410);
    expect(await consentOf(u.userId)).toBe(404);
  });

  it("an expired code fails, and so does a code sent for another link", async () => {
    const u = await createUser(t, { environment: "production" });
    const first = await newLink(u.phoneNumber);
    const second = await newLink(u.phoneNumber);
    const page1 = await openPage(first.url);
    const page2 = await openPage(second.url);
    let before = sms.texts.length;
    await requestCode(first.url, page1);
    const code1 = await textedCode(u.phoneNumber, before);
    before = sms.texts.length;
    await requestCode(second.url, page2);
    const code2 = await textedCode(u.phoneNumber, before);
    // The first link's code on the second link's page (unless the two happen to match).
    if (code1 !== code2)
      expect((await submit(second.url, page2, "accept", { code: code1 })).status).toBe(422);
    clock.advance(10 * ms.minute + 1);
    expect((await submit(first.url, page1, "accept", { code: code1 })).status).toBe(422);
    expect(await linkStatus(first.id)).toBe("PENDING");
    expect(await consentOf(u.userId)).toBe(404);
  });

  it("sends at most three codes per link an hour (429 with Retry-After), then again after the hour", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const page = await openPage(link.url);
    const answers: Response[] = [];
    for (let i = 0; i < 4; i++) answers.push(await requestCode(link.url, page));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(Number(answers[3]?.headers.get("retry-after"))).toBeGreaterThan(0);
    clock.advance(ms.hour + 1);
    expect((await requestCode(link.url, page)).status).toBe(200);
  });

  it("one phone gets at most five codes an hour, however many links a partner makes for it", async () => {
    const u = await createUser(t, { environment: "production" });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const link = await newLink(u.phoneNumber);
      const page = await openPage(link.url);
      for (let j = 0; j < 2; j++) statuses.push((await requestCode(link.url, page)).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });
});

describe("no account oracle", () => {
  it("pages for a phone with and without an account differ only in their random tokens", async () => {
    const known = await createUser(t, { environment: "production" });
    const unknownPhone = "+2348099999991";
    const knownLink = await newLink(known.phoneNumber);
    const unknownLink = await newLink(unknownPhone);
    const normalise = (html: string, phone: string, url: string) =>
      html
        .replaceAll(new URL(url).pathname, "/consent/TOKEN")
        .replace(/name="csrf" value="[^"]+"/g, 'name="csrf" value="CSRF"')
        .replaceAll(phone.slice(-4), "LAST4")
        .replace(/expires [^<]+GMT/, "expires WHEN");
    const [knownPage, unknownPage] = await Promise.all([openPage(knownLink.url), openPage(unknownLink.url)]);
    expect([knownPage.status, unknownPage.status]).toEqual([200, 200]);
    expect(normalise(knownPage.html, known.phoneNumber, knownLink.url)).toBe(
      normalise(unknownPage.html, unknownPhone, unknownLink.url),
    );
    // Asking for a code: the same answer, page and status; only the known phone gets a text.
    const before = sms.texts.length;
    const sent = await Promise.all([
      requestCode(knownLink.url, knownPage),
      requestCode(unknownLink.url, unknownPage),
    ]);
    expect(sent.map((r) => r.status)).toEqual([200, 200]);
    const [knownHtml, unknownHtml] = await Promise.all(sent.map((r) => r.text()));
    expect(normalise(knownHtml ?? "", known.phoneNumber, knownLink.url)).toBe(
      normalise(unknownHtml ?? "", unknownPhone, unknownLink.url),
    );
    await textedCode(known.phoneNumber, before);
    expect(sms.texts.filter((x) => x.to === unknownPhone.slice(1))).toHaveLength(0);
    // Guessing on the unknown phone's page answers exactly as a wrong code does.
    const guess = await submit(unknownLink.url, unknownPage, "accept", { code: "000000" });
    expect(guess.status).toBe(422);
    expect(await guess.text()).toContain("That code is not right. 4 tries left.");
  });
});

describe("production without an SMS provider", () => {
  it("refuses to create consent links, with a clear error", async () => {
    const bare = await startTestApp();
    try {
      const p = await createPartner(bare);
      const res = await rest(bare.partnerUrl, "POST", "/partner/v1/consent-links", {
        key: p.liveKey,
        body: { phoneNumber: "+2348011112222", scopes: ["standing"], ledgerWindowDays: 30 },
      });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe("unavailable");
      expect(res.body.message).toContain("SMS provider");
      // The sandbox needs none: its code is fixed.
      const sandbox = await rest(bare.partnerUrl, "POST", "/partner/v1/consent-links", {
        key: p.sandboxKey,
        body: { phoneNumber: "+2348011112222", scopes: ["standing"], ledgerWindowDays: 30 },
      });
      expect(sandbox.status).toBe(200);
    } finally {
      await bare.stop();
    }
  });
});

describe("the dashboard's prompt session", () => {
  /** Opens a prompt URL as the dashboard's web view would, then the page it leads to, with its cookies. */
  const openPrompt = async (url: string) => {
    const opened = await fetch(url, { redirect: "manual" });
    if (opened.status !== 303) return { status: opened.status };
    const session = opened.headers.get("set-cookie")?.split(";")[0] ?? "";
    const pageUrl = new URL(opened.headers.get("location") ?? "", url).toString();
    const page = await fetch(pageUrl, { headers: { cookie: session, accept: "text/html" } });
    const html = await page.text();
    const csrfCookie = page.headers.get("set-cookie")?.split(";")[0] ?? "";
    return {
      status: page.status,
      html,
      pageUrl,
      decide: (decision: "accept" | "decline") =>
        fetch(pageUrl, {
          method: "POST",
          redirect: "manual",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            origin: new URL(pageUrl).origin,
            cookie: `${session}; ${csrfCookie}`,
          },
          body: new URLSearchParams({
            csrf: /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? "",
            step: "decide",
            decision,
          }).toString(),
        }),
    };
  };

  it("opens the page already authenticated, once, and the consent says PLATFORM_SESSION", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const texts = sms.texts.length;
    const { url } = await t.internal.consents.createPromptSession({
      userId: u.userId,
      consentLinkId: link.id,
    });
    expect(url).toMatch(/\/prompt\/[0-9A-Za-z]{32}$/);
    const page = await openPrompt(url);
    expect(page.status).toBe(200);
    expect(page.html).toContain("no code is needed");
    expect(page.html).not.toContain('name="code"');
    // Single use: the URL does not open twice.
    expect((await openPrompt(url)).status).toBe(404);
    const res = await page.decide?.("accept");
    expect(res?.status).toBe(200);
    expect(await linkStatus(link.id)).toBe("ACCEPTED");
    const consent = await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, {
      key: a.liveKey,
    });
    expect(consent.body.authentication.method).toBe("PLATFORM_SESSION");
    // No text was needed.
    expect(sms.texts.length).toBe(texts);
  });

  it("two sessions answering the same link at once grant one consent; the other is told it is used (410)", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    // Both pages are open, signed in, before either is answered (two devices, or the dashboard asked twice).
    const pages = [];
    for (let i = 0; i < 2; i++) {
      const { url } = await t.internal.consents.createPromptSession({
        userId: u.userId,
        consentLinkId: link.id,
      });
      pages.push(await openPrompt(url));
    }
    for (const page of pages) expect(page.html).toContain("no code is needed");
    const answers = await Promise.all(pages.map((page) => page.decide?.("accept")));
    expect(answers.map((res) => res?.status).sort()).toEqual([200, 410]);
    expect(await linkStatus(link.id)).toBe("ACCEPTED");
    const consent = await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, {
      key: a.liveKey,
    });
    expect(consent.body.authentication.method).toBe("PLATFORM_SESSION");
    const granted = await sql(t.app.orm.em.fork(), "select 1 from consents where user_id = $1", [u.userId]);
    expect(granted).toHaveLength(1);
  });

  it("expires", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const { url } = await t.internal.consents.createPromptSession({
      userId: u.userId,
      consentLinkId: link.id,
      expiresInSeconds: 60,
    });
    clock.advance(61_000);
    expect((await openPrompt(url)).status).toBe(404);
    expect(await linkStatus(link.id)).toBe("PENDING");
  });

  it("a session for one user cannot answer another person's link", async () => {
    const signedIn = await createUser(t, { environment: "production" });
    const other = await createUser(t, { environment: "production" });
    const link = await newLink(other.phoneNumber);
    const { url } = await t.internal.consents.createPromptSession({
      userId: signedIn.userId,
      consentLinkId: link.id,
    });
    const page = await openPrompt(url);
    const res = await page.decide?.("accept");
    expect(res?.status).toBe(403);
    expect(await linkStatus(link.id)).toBe("PENDING");
    expect(await consentOf(other.userId)).toBe(404);
    expect(await consentOf(signedIn.userId)).toBe(404);
  });
});

describe("malformed page paths and one partner against another", () => {
  it("answer 404 to paths that do not decode, and the service stays up", async () => {
    for (const path of ["/consent/%FF", "/consent/%", "/prompt/%FF", "/consent/%E0%A4%A"]) {
      const get = await fetch(`${t.partnerUrl}${path}`, { headers: { accept: "text/html" } });
      expect(get.status, path).toBe(404);
      const post = await fetch(`${t.partnerUrl}${path}`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: t.partnerUrl },
        body: "step=send",
      });
      expect(post.status, path).toBeGreaterThanOrEqual(400);
      expect(post.status, path).toBeLessThan(500);
    }
    expect((await fetch(`${t.partnerUrl}/readyz`)).status).toBe(200);
  });

  it("concurrent sends never pass one partner's five texts an hour to one phone", async () => {
    const u = await createUser(t, { environment: "production" });
    const links = await Promise.all(Array.from({ length: 4 }, () => newLink(u.phoneNumber)));
    const pages = await Promise.all(links.map((l) => openPage(l.url)));
    const answers = await Promise.all(
      links.flatMap((l, i) => [0, 1, 2].map(() => requestCode(l.url, pages[i] as OpenedPage))),
    );
    expect(answers.filter((r) => r.status === 200)).toHaveLength(5);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(7);
  });

  it("one partner's wrong codes do not lock a person out of another partner's link", async () => {
    const u = await createUser(t, { environment: "production" });
    // Partner A burns ten wrong codes on two of its links for this phone: A's codes stop for the day.
    for (let l = 0; l < 2; l++) {
      const link = await newLink(u.phoneNumber);
      const page = await openPage(link.url);
      await requestCode(link.url, page);
      for (let i = 0; i < 5; i++) await submit(link.url, page, "accept", { code: "999999" });
    }
    const third = await newLink(u.phoneNumber);
    const thirdPage = await openPage(third.url);
    expect((await requestCode(third.url, thirdPage)).status).toBe(429);
    // A's new link is limited for the day, not locked: no wrong code was ever entered on it.
    const answered = await submit(third.url, thirdPage, "accept", { code: "999999" });
    expect(answered.status).toBe(429);
    expect(answered.headers.get("retry-after")).toBe("86400");
    expect(await linkStatus(third.id)).toBe("PENDING");
    // Partner B's link for the same person still works with the code the person is sent.
    const other = await createPartner(t, "Honest Lending");
    const res = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
      key: other.liveKey,
      body: { phoneNumber: u.phoneNumber, scopes: ["standing"], ledgerWindowDays: 30 },
    });
    const page = await openPage(res.body.url);
    const before = sms.texts.length;
    expect((await requestCode(res.body.url, page)).status).toBe(200);
    const code = await textedCode(u.phoneNumber, before);
    expect((await submit(res.body.url, page, "accept", { code })).status).toBe(200);
  });
});

describe("a consent form too large", () => {
  it("is refused 413 and its connection closed, so the sender's next request is answered", async () => {
    const u = await createUser(t, { environment: "production" });
    const link = await newLink(u.phoneNumber);
    const url = new URL(link.url);
    const answers = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => {
        const body = `step=send&x=${"a".repeat(64 * 1024)}`;
        socket.write(
          `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nOrigin: ${url.origin}\r\n` +
            `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        );
      });
      let got = "";
      socket.on("data", (d) => {
        got += d.toString("latin1");
      });
      socket.on("close", () => resolve(got));
      socket.on("error", reject);
      setTimeout(() => reject(new Error(`connection left open; got: ${got.slice(0, 200)}`)), 5_000).unref();
    });
    expect(answers).toMatch(/^HTTP\/1\.1 413/);
    expect(answers.toLowerCase()).toContain("connection: close");
  });
});
