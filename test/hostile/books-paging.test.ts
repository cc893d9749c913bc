import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { newId } from "../../src/platform/ids.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// GET /partner/v1/books pages like the other lists: a partner with many entries gets pages of at most the
// limit, the cursor walks the whole period exactly once (ties in booking time included), the totals are the
// period's on every page, and a cursor is good only for the partner, environment and period it came from.

let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
const COUNT = 250;
const BASE = Date.parse("2026-03-01T08:00:00Z");

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  a = await createPartner(t);
  b = await createPartner(t);
  const sandboxUser = (await createUser(t)).userId;
  const liveUser = (await createUser(t, { environment: "production" })).userId;
  const em = t.app.orm.em.fork();
  const book = async (partnerId: string, environment: string, userId: string, n: number, at: Date) => {
    const id = newId("dsb");
    await sql(
      em,
      `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                  destination, reference, schedule_accepted_at, provider, created_at)
       values ($1, $2, $3, $4, 'DELIVERED', $5, 0, 0, 'WALLET', $1, $6, 'sandbox', $6)`,
      [id, partnerId, environment, userId, String(n), at],
    );
    await sql(
      em,
      `insert into book_entries (partner_id, environment, disbursement_id, kind, amount_kobo, booked_at)
       values ($1, $2, $3, 'PRINCIPAL_OUT', $4, $5)`,
      [partnerId, environment, id, String(-n), at],
    );
  };
  // Three entries per minute, so pages break inside a run of equal booking times; one a day over ~6 days.
  for (let i = 0; i < COUNT; i++)
    await book(a.partnerId, "sandbox", sandboxUser, i + 1, new Date(BASE + Math.floor(i / 3) * 100_000));
  for (let i = 0; i < 5; i++) {
    await book(a.partnerId, "production", liveUser, 1_000_000 + i, new Date(BASE + i));
    await book(b.partnerId, "sandbox", sandboxUser, 2_000_000 + i, new Date(BASE + i));
  }
});
afterAll(() => t?.stop());

const books = (key: string, query: string) =>
  rest(t.partnerUrl, "GET", `/partner/v1/books?${query}`, { key });
const total = (COUNT * (COUNT + 1)) / 2;

describe("the books, paged", () => {
  it("walk the whole period once, in order, at most `limit` a page, with the period's totals on every page", async () => {
    const seen: string[] = [];
    let cursor = "";
    let pages = 0;
    for (;;) {
      const res = await books(a.sandboxKey, `limit=100${cursor ? `&starting_after=${cursor}` : ""}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      pages++;
      expect(res.body.entries.length).toBeLessThanOrEqual(100);
      expect(res.body).toMatchObject({ principalOutKobo: String(-total), netKobo: String(-total) });
      for (const e of res.body.entries) seen.push(e.amountKobo);
      if (!res.body.hasMore) {
        expect(res.body.nextStartingAfter).toBe("");
        break;
      }
      cursor = res.body.nextStartingAfter;
      // The cursor tells nothing: no booking time, no internal id.
      expect(Buffer.from(cursor, "base64url").toString("latin1")).not.toMatch(/2026|PRINCIPAL/);
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(Array.from({ length: COUNT }, (_, i) => String(-(i + 1))));
    // Without a limit: 100.
    expect((await books(a.sandboxKey, "")).body.entries).toHaveLength(100);
  });

  it("keep the period's totals to the period, whatever the page", async () => {
    const res = await books(a.sandboxKey, "from=2026-03-01&to=2026-03-01&limit=1");
    expect(res.status).toBe(200);
    // 2026-03-01 08:00 plus 100 s per three entries: the first day holds them all.
    expect(res.body.entries).toHaveLength(1);
    expect(res.body.hasMore).toBe(true);
    expect(res.body.principalOutKobo).toBe(String(-total));
    const none = await books(a.sandboxKey, "from=2026-03-02&to=2026-03-31");
    expect(none.body).toMatchObject({ entries: [], hasMore: false, netKobo: "0" });
  });

  it("refuse a cursor from another partner, environment or period, or made up: 400, never another's rows", async () => {
    const first = await books(a.sandboxKey, "limit=10");
    const cursor = first.body.nextStartingAfter as string;
    expect(cursor).not.toBe("");
    for (const [key, query] of [
      [b.sandboxKey, `limit=10&starting_after=${cursor}`],
      [a.liveKey, `limit=10&starting_after=${cursor}`],
      [a.sandboxKey, `from=2026-01-01&limit=10&starting_after=${cursor}`],
      [a.sandboxKey, "starting_after=AAAA"],
      [a.sandboxKey, `starting_after=${cursor.slice(0, -2)}xx`],
    ] as const) {
      const res = await books(key, query);
      expect(res.status, query).toBe(400);
      expect(res.body.code).toBe("invalid_argument");
    }
    for (const limit of ["1001", "-1"]) {
      const res = await books(a.sandboxKey, `limit=${limit}`);
      expect(res.status, limit).toBe(422);
      expect(res.body.details.fields.limit).toBeDefined();
    }
    // Each tenant sees only its own.
    expect((await books(b.sandboxKey, "")).body.entries).toHaveLength(5);
    expect((await books(a.liveKey, "")).body.entries).toHaveLength(5);
  });
});
