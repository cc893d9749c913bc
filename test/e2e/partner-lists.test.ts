import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { newId } from "../../src/platform/ids.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, rest } from "../support/clients.ts";

// The partner's lists (CONTRACT.md §1, §4, §6), as the portal reads them: consents, consent links and
// disbursements newest first, a page at a time, each filter exact, each item as its GET answers it; and the
// books per Lagos day, adding up to GetBooks' totals.

let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 2000, refillPerSecond: 2000 },
        write: { capacity: 2000, refillPerSecond: 2000 },
      },
    },
  });
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const get = (path: string, key = p.sandboxKey) => rest(t.partnerUrl, "GET", path, { key });
const post = (path: string, body?: unknown, headers: Record<string, string> = {}) =>
  rest(t.partnerUrl, "POST", path, { key: p.sandboxKey, ...(body === undefined ? {} : { body }), headers });
const day = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
const grant = (userId: string) =>
  t.internal.consents.grantConsent({
    userId,
    partnerId: p.partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });

/** Every item of a list, walking its pages of `limit`; `between` runs after each page. */
async function walk(path: string, items: string, limit: number, between?: () => Promise<void>) {
  const ids: string[] = [];
  let after = "";
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const res = await get(`${path}${sep}limit=${limit}${after ? `&starting_after=${after}` : ""}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const page = res.body[items] as { id: string }[];
    expect(page.length).toBeLessThanOrEqual(limit);
    ids.push(...page.map((x) => x.id));
    if (!res.body.hasMore) return ids;
    after = page.at(-1)?.id ?? "";
    await between?.();
  }
}

const newestFirst = (ids: string[]) => [...ids].sort().reverse();

describe("ListDisbursements", () => {
  const created: string[] = [];
  const users: string[] = [];
  const cancelled: string[] = [];
  const create = async (userId: string, n: number) => {
    const res = await post(
      "/partner/v1/disbursements",
      {
        userId,
        principalKobo: String(100_000 + n),
        destination: "WALLET",
        reference: `list-${n}-${Math.random().toString(36).slice(2, 8)}`,
        repaymentSchedule: { installments: [{ dueDate: day(30), amountKobo: String(110_000 + n) }] },
      },
      { "idempotency-key": `k-${Math.random()}` },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.id as string;
  };

  beforeAll(async () => {
    for (let u = 0; u < 3; u++) {
      const { userId } = await createUser(t);
      await grant(userId);
      users.push(userId);
    }
    for (let i = 0; i < 12; i++) created.push(await create(users[i % 3] as string, i));
    // Two declined by the person, one whose mandate lapsed: all three shown CANCELLED.
    for (const id of [created[1], created[4]] as string[]) {
      expect((await post(`/partner/v1/sandbox/disbursements/${id}/decline`)).status).toBe(200);
      cancelled.push(id);
    }
    const lapsed = created[7] as string;
    await sql(
      t.app.orm.em.fork(),
      "update disbursements set acceptance_expires_at = now() - interval '1 minute' where id = $1",
      [lapsed],
    );
    cancelled.push(lapsed);
  });

  it("lists newest first, each exactly as GetDisbursement answers it", async () => {
    const res = await get("/partner/v1/disbursements");
    expect(res.status).toBe(200);
    expect(res.body.hasMore).toBe(false);
    const ids = res.body.disbursements.map((d: { id: string }) => d.id);
    expect(ids).toEqual(newestFirst(created));
    for (const d of res.body.disbursements)
      expect(d).toEqual((await get(`/partner/v1/disbursements/${d.id}`)).body);
    const lapsed = res.body.disbursements.find((d: { id: string }) => d.id === created[7]);
    expect(lapsed).toMatchObject({
      status: "CANCELLED",
      failureReason: "mandate_expired",
      acceptanceUrl: "",
    });
  });

  it("pages without gaps or repeats while new disbursements are created between pages", async () => {
    let n = 100;
    const ids = await walk("/partner/v1/disbursements", "disbursements", 5, async () => {
      await create(users[0] as string, n++);
    });
    expect(ids).toEqual(newestFirst(created));
  });

  it("filters by status as GET shows it, and by user, exactly", async () => {
    const byStatus = async (status: string) =>
      (await get(`/partner/v1/disbursements?status=${status}&limit=100`)).body.disbursements.map(
        (d: { id: string }) => d.id,
      );
    expect(await byStatus("CANCELLED")).toEqual(newestFirst(cancelled));
    const awaiting = await byStatus("AWAITING_ACCEPTANCE");
    expect(awaiting).not.toContain(created[7]);
    expect(awaiting).toEqual(expect.arrayContaining(created.filter((id) => !cancelled.includes(id))));
    expect(await byStatus("DELIVERED")).toEqual([]);
    const user = users[2] as string;
    const mine = await walk(`/partner/v1/disbursements?user_id=${user}`, "disbursements", 2);
    expect(mine).toEqual(newestFirst(created.filter((_, i) => i % 3 === 2)));
    // Every cancelled one (declined twice, one lapsed) is the second user's.
    const both = await get(`/partner/v1/disbursements?user_id=${users[1]}&status=CANCELLED`);
    expect(both.body.disbursements.map((d: { id: string }) => d.id)).toEqual(newestFirst(cancelled));
  });

  it("answers on Connect the same list", async () => {
    const client = connectClient(DisbursementService, t.partnerUrl, `Bearer ${p.sandboxKey}`);
    const res = await client.listDisbursements({ limit: 3, userId: users[1] as string });
    expect(res.disbursements.map((d) => d.id)).toEqual(
      newestFirst(created.filter((_, i) => i % 3 === 1)).slice(0, 3),
    );
    expect(res.hasMore).toBe(true);
  });
});

describe("ListConsents", () => {
  const all: string[] = [];
  const byStatus: Record<string, string[]> = { ACTIVE: [], REVOKED: [], EXPIRED: [] };
  let twice = "";

  beforeAll(async () => {
    p = await createPartner(t);
    for (let i = 0; i < 6; i++) {
      const { userId } = await createUser(t);
      const { consent } = await grant(userId);
      all.push(consent?.id ?? "");
      if (i === 0) {
        // A second grant supersedes the first: REVOKED by SYSTEM.
        twice = userId;
        const again = await grant(userId);
        all.push(again.consent?.id ?? "");
      }
    }
    byStatus.REVOKED?.push(all[0] as string);
    expect((await post(`/partner/v1/consents/${all[2]}/revoke`)).status).toBe(200);
    byStatus.REVOKED?.push(all[2] as string);
    await sql(t.app.orm.em.fork(), "update consents set status = 'EXPIRED' where id = $1", [all[3]]);
    byStatus.EXPIRED?.push(all[3] as string);
    byStatus.ACTIVE?.push(...all.filter((id) => ![all[0], all[2], all[3]].includes(id)));
  });

  it("lists newest first, each as GetConsent answers it, pages without gaps or repeats under new grants", async () => {
    const res = await get("/partner/v1/consents");
    expect(res.body.consents.map((c: { id: string }) => c.id)).toEqual(newestFirst(all));
    for (const c of res.body.consents) expect(c).toEqual((await get(`/partner/v1/consents/${c.id}`)).body);
    const ids = await walk("/partner/v1/consents", "consents", 2, async () => {
      await grant((await createUser(t)).userId);
    });
    expect(ids).toEqual(newestFirst(all));
  });

  it("filters by status and by user exactly", async () => {
    for (const [status, ids] of Object.entries(byStatus)) {
      const listed = (await get(`/partner/v1/consents?status=${status}&limit=100`)).body.consents;
      const mine = listed.map((c: { id: string }) => c.id).filter((id: string) => all.includes(id));
      expect(mine, status).toEqual(newestFirst(ids));
      expect(listed.every((c: { status: string }) => c.status === status)).toBe(true);
    }
    const user = await get(`/partner/v1/consents?user_id=${twice}`);
    expect(user.body.consents.map((c: { id: string }) => c.id)).toEqual([all[1], all[0]]);
    const client = connectClient(ConsentService, t.partnerUrl, `Bearer ${p.sandboxKey}`);
    const res = await client.listConsents({ userId: twice, limit: 1 });
    expect(res.consents.map((c) => c.id)).toEqual([all[1]]);
    expect(res.hasMore).toBe(true);
  });
});

describe("ListConsentLinks", () => {
  const links: string[] = [];
  const byStatus: Record<string, string[]> = { PENDING: [], ACCEPTED: [], DECLINED: [], EXPIRED: [] };

  beforeAll(async () => {
    p = await createPartner(t);
    for (let i = 0; i < 6; i++) {
      const { phoneNumber } = await createUser(t);
      const res = await post("/partner/v1/consent-links", {
        phoneNumber,
        scopes: ["standing"],
        ledgerWindowDays: 30,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      links.push(res.body.id);
    }
    expect((await post(`/partner/v1/sandbox/consent-links/${links[0]}/accept`)).status).toBe(200);
    expect((await post(`/partner/v1/sandbox/consent-links/${links[1]}/decline`)).status).toBe(200);
    await sql(
      t.app.orm.em.fork(),
      "update consent_links set expires_at = now() - interval '1 minute' where id = $1",
      [links[2]],
    );
    byStatus.ACCEPTED?.push(links[0] as string);
    byStatus.DECLINED?.push(links[1] as string);
    byStatus.EXPIRED?.push(links[2] as string);
    byStatus.PENDING?.push(...links.slice(3));
  });

  it("lists newest first, each as GetConsentLink answers it (its url included), paged", async () => {
    const res = await get("/partner/v1/consent-links");
    expect(res.body.consentLinks.map((l: { id: string }) => l.id)).toEqual(newestFirst(links));
    for (const l of res.body.consentLinks) {
      expect(l.url).toMatch(/\/consent\//);
      expect(l).toEqual((await get(`/partner/v1/consent-links/${l.id}`)).body);
    }
    expect(await walk("/partner/v1/consent-links", "consentLinks", 4)).toEqual(newestFirst(links));
  });

  it("filters by status as GetConsentLink shows it (a PENDING link past its expiry is EXPIRED)", async () => {
    for (const [status, ids] of Object.entries(byStatus)) {
      const res = await get(`/partner/v1/consent-links?status=${status}`);
      expect(
        res.body.consentLinks.map((l: { id: string }) => l.id),
        status,
      ).toEqual(newestFirst(ids));
      expect(res.body.consentLinks.every((l: { status: string }) => l.status === status)).toBe(true);
    }
  });
});

describe("GetBooksSeries", () => {
  let q: PartnerFixture;
  beforeAll(async () => {
    q = await createPartner(t);
    const { userId } = await createUser(t);
    const em = t.app.orm.em.fork();
    const book = async (at: string, entries: [string, number][]) => {
      const id = newId("dsb");
      await sql(
        em,
        `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                    destination, reference, schedule_accepted_at, provider, created_at)
         values ($1, $2, 'sandbox', $3, 'DELIVERED', 1000, 15, 150, 'WALLET', $1, $4, 'sandbox', $4)`,
        [id, q.partnerId, userId, at],
      );
      for (const [kind, amount] of entries)
        await sql(
          em,
          `insert into book_entries (partner_id, environment, disbursement_id, kind, amount_kobo, booked_at)
           values ($1, 'sandbox', $2, $3, $4, $5)`,
          [q.partnerId, id, kind, String(amount), at],
        );
    };
    await book("2026-05-02T08:00:00Z", [
      ["PRINCIPAL_OUT", -100_000],
      ["FEE", -1_500],
    ]);
    await book("2026-05-02T12:00:00Z", [["REPAYMENT_IN", 40_000]]);
    // 23:30 UTC is 00:30 the next day in Lagos.
    await book("2026-05-03T23:30:00Z", [["REPAYMENT_IN", 7_000]]);
    await book("2026-05-06T09:00:00Z", [
      ["PRINCIPAL_OUT", -50_000],
      ["FEE", -750],
      ["PRINCIPAL_REVERSED", 50_000],
      ["FEE_REVERSED", 750],
      ["REPAYMENT_REFUND", -2_000],
    ]);
    // Outside the period.
    await book("2026-04-20T10:00:00Z", [["PRINCIPAL_OUT", -999]]);
  });

  it("gives every Lagos day of the period, and adds up to GetBooks' totals for the same period", async () => {
    const res = await get("/partner/v1/books/series?from=2026-05-01&to=2026-05-07", q.sandboxKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const days = res.body.days as Record<string, string>[];
    expect(days.map((d) => d.date)).toEqual([
      "2026-05-01",
      "2026-05-02",
      "2026-05-03",
      "2026-05-04",
      "2026-05-05",
      "2026-05-06",
      "2026-05-07",
    ]);
    expect(days[0]).toEqual({
      date: "2026-05-01",
      principalOutKobo: "0",
      feesKobo: "0",
      repaymentsInKobo: "0",
      refundsKobo: "0",
      netKobo: "0",
    });
    expect(days[1]).toMatchObject({
      principalOutKobo: "-100000",
      feesKobo: "-1500",
      repaymentsInKobo: "40000",
    });
    expect(days[2]?.repaymentsInKobo).toBe("0");
    expect(days[3]?.repaymentsInKobo).toBe("7000");
    expect(days[5]).toMatchObject({
      principalOutKobo: "0",
      feesKobo: "0",
      refundsKobo: "-2000",
      netKobo: "-2000",
    });
    const books = await get("/partner/v1/books?from=2026-05-01&to=2026-05-07", q.sandboxKey);
    for (const field of ["principalOutKobo", "feesKobo", "repaymentsInKobo", "refundsKobo", "netKobo"])
      expect(String(days.reduce((s, d) => s + BigInt(d[field] ?? "0"), 0n)), field).toBe(books.body[field]);
  });

  it("answers on Connect too, and a one-day period is one day", async () => {
    const client = connectClient(DisbursementService, t.partnerUrl, `Bearer ${q.sandboxKey}`);
    const res = await client.getBooksSeries({ from: "2026-05-02", to: "2026-05-02" });
    expect(res.days).toHaveLength(1);
    expect(res.days[0]?.repaymentsInKobo).toBe(40_000n);
  });
});
