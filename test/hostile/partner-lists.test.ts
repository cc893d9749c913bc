import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Consent_Status, ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { consentRepository } from "../../src/consent/consent.repository.ts";
import { booksRepository } from "../../src/disbursements/books.repository.ts";
import { disbursementListRepository } from "../../src/disbursements/disbursement-list.repository.ts";
import type { Em } from "../../src/platform/db/orm.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { newId } from "../../src/platform/ids.ts";
import { type Environment, scopeToTenant } from "../../src/platform/tenancy.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, rest } from "../support/clients.ts";

// The partner's lists under attack: another tenant's rows (another partner's, or the other environment's)
// are never listed, whatever the filter or cursor; bad filters, limits and cursors get the contract's 400 or
// 422; a cursor from another partner is refused; and thousands of another tenant's rows do not change how
// many rows a page reads (counted by PostgreSQL in the page's own transaction, not timed).

let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
let userA = "";
let liveUserA = "";
let userB = "";
const mine = { consents: [] as string[], links: [] as string[], disbursements: [] as string[] };
const live = { consents: [] as string[], disbursements: [] as string[] };
const theirs = { consents: [] as string[], links: [] as string[], disbursements: [] as string[] };

const em = () => t.app.orm.em.fork();

/** Rows of one tenant written straight to the tables (the links' sealed tokens are never opened here). */
async function seed(partnerId: string, environment: Environment, userId: string, n: number, prefix = "") {
  if (partnerId !== a.partnerId || environment !== "sandbox")
    await seedLinks(partnerId, environment, n, prefix);
  await sql(
    em(),
    `insert into consents (id, partner_id, environment, user_id, status, scopes, ledger_window_days,
                           max_ledger_window_days, source, granted_at, expires_at, revoked_at, revoked_by)
     select 'cns_' || $4 || lpad(g::text, 26 - length($4), '0'), $1, $2, $3, 'REVOKED', '{standing}', 30, 30,
            'DASHBOARD', now(), now() + interval '1 year', now(), 'USER'
       from generate_series(1, $5) g`,
    [partnerId, environment, userId, prefix, n],
  );
  await sql(
    em(),
    `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                destination, reference, schedule_accepted_at, provider, created_at)
     select 'dsb_' || $4 || lpad(g::text, 26 - length($4), '0'), $1, $2, $3, 'DELIVERED', 1000, 15, 150, 'WALLET',
            $4 || g::text, now(), 'sandbox', now()
       from generate_series(1, $5) g`,
    [partnerId, environment, userId, prefix, n],
  );
  await sql(
    em(),
    `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status)
     select 'rpy_' || substr(id, 5), id, 1, '2027-01-01', 1100, 'SCHEDULED'
       from disbursements where partner_id = $1 and environment = $2 and id like 'dsb_' || $3 || '%'`,
    [partnerId, environment, prefix],
  );
  await sql(
    em(),
    `insert into book_entries (partner_id, environment, disbursement_id, kind, amount_kobo, booked_at)
     select $1, $2, id, 'PRINCIPAL_OUT', -1000, '2026-06-10T10:00:00Z'
       from disbursements where partner_id = $1 and environment = $2 and id like 'dsb_' || $3 || '%'`,
    [partnerId, environment, prefix],
  );
}

/** Links of another tenant, whose sealed tokens are never opened. */
async function seedLinks(partnerId: string, environment: Environment, n: number, prefix: string) {
  await sql(
    em(),
    `insert into consent_links (id, partner_id, environment, token_hash, token_enc, phone_hash, phone_last4, scopes,
                                ledger_window_days, max_ledger_window_days, status, expires_at, created_at)
     select 'cnl_' || $3 || lpad(g::text, 26 - length($3), '0'), $1, $2, decode(md5($3 || g::text || random()::text), 'hex'), '\\x00', '\\x00',
            '0000', '{standing}', 30, 30, 'PENDING', now() + interval '1 day', now()
       from generate_series(1, $4) g`,
    [partnerId, environment, prefix, n],
  );
}

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 2000, refillPerSecond: 2000 },
        write: { capacity: 2000, refillPerSecond: 2000 },
      },
    },
  });
  a = await createPartner(t);
  b = await createPartner(t);
  userA = (await createUser(t)).userId;
  liveUserA = (await createUser(t, { environment: "production" })).userId;
  userB = (await createUser(t)).userId;
  // A's own few, in each environment; B's few, for the cursor tests.
  await seed(a.partnerId, "sandbox", userA, 5, "0A");
  for (let i = 0; i < 5; i++) {
    const res = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
      key: a.sandboxKey,
      body: {
        phoneNumber: `+2348099${String(i).padStart(6, "0")}`,
        scopes: ["standing"],
        ledgerWindowDays: 30,
      },
    });
    expect(res.status).toBe(200);
  }
  await seed(a.partnerId, "production", liveUserA, 3, "0C");
  await seed(b.partnerId, "sandbox", userB, 3, "0B");
  const ids = async (table: string, partnerId: string, environment: string) =>
    (
      await sql<{ id: string }>(
        em(),
        `select id from ${table} where partner_id = $1 and environment = $2 order by id desc`,
        [partnerId, environment],
      )
    ).map((r) => r.id);
  mine.consents = await ids("consents", a.partnerId, "sandbox");
  mine.links = await ids("consent_links", a.partnerId, "sandbox");
  mine.disbursements = await ids("disbursements", a.partnerId, "sandbox");
  live.consents = await ids("consents", a.partnerId, "production");
  live.disbursements = await ids("disbursements", a.partnerId, "production");
  theirs.consents = await ids("consents", b.partnerId, "sandbox");
  theirs.links = await ids("consent_links", b.partnerId, "sandbox");
  theirs.disbursements = await ids("disbursements", b.partnerId, "sandbox");
});
afterAll(() => t?.stop());

const get = (key: string, path: string) => rest(t.partnerUrl, "GET", path, { key });
const lists = [
  ["/partner/v1/consents", "consents", "consents"],
  ["/partner/v1/consent-links", "consentLinks", "links"],
  ["/partner/v1/disbursements", "disbursements", "disbursements"],
] as const;

describe("the partner's lists, across tenants", () => {
  it("list only the caller's own rows of the caller's environment", async () => {
    for (const [path, field, kind] of lists) {
      const res = await get(a.sandboxKey, `${path}?limit=100`);
      expect(res.status, path).toBe(200);
      expect(
        res.body[field].map((x: { id: string }) => x.id),
        path,
      ).toEqual(mine[kind]);
    }
    const consents = await get(a.liveKey, "/partner/v1/consents");
    expect(consents.body.consents.map((x: { id: string }) => x.id)).toEqual(live.consents);
    const disbursements = await get(a.liveKey, "/partner/v1/disbursements");
    expect(disbursements.body.disbursements.map((x: { id: string }) => x.id)).toEqual(live.disbursements);
    // Filtering by another tenant's user finds nothing.
    for (const [path, field] of [lists[0], lists[2]]) {
      const res = await get(a.sandboxKey, `${path}?user_id=${userB}`);
      expect(res.body[field], path).toEqual([]);
      expect((await get(a.sandboxKey, `${path}?user_id=${liveUserA}`)).body[field], path).toEqual([]);
    }
    const series = await get(a.sandboxKey, "/partner/v1/books/series?from=2026-06-10&to=2026-06-10");
    expect(series.body.days[0].principalOutKobo).toBe("-5000");
  });

  it("refuse a cursor from another partner or the other environment: 400 invalid_argument, as for one that never was", async () => {
    for (const [path, , kind] of lists) {
      const foreign = [
        [a.sandboxKey, theirs[kind][0]],
        [a.liveKey, mine[kind][0]],
        [b.sandboxKey, mine[kind][0]],
        [a.sandboxKey, newId(kind === "links" ? "cnl" : kind === "consents" ? "cns" : "dsb")],
      ] as const;
      for (const [key, cursor] of foreign) {
        const res = await get(key, `${path}?starting_after=${cursor}`);
        expect(res.status, `${path} ${cursor}`).toBe(400);
        expect(res.body.code).toBe("invalid_argument");
        expect(res.body.message).toMatch(/^starting_after is not one of your/);
      }
    }
    const client = connectClient(ConsentService, t.partnerUrl, `Bearer ${a.sandboxKey}`);
    const err = await client.listConsents({ startingAfter: theirs.consents[0] }).catch((e: unknown) => e);
    expect(errorInfoOf(err)?.reason).toBe("invalid_argument");
    // An enum number no status has: 422 naming the field.
    const bad = await client.listConsents({ status: 99 as Consent_Status }).catch((e: unknown) => e);
    expect(errorInfoOf(bad)?.reason).toBe("validation_failed");
  });

  it("answer bad filters, cursors and limits in the contract's words; limits at their bounds work", async () => {
    const bad: [string, number, string, string][] = [
      ["/partner/v1/consents?limit=101", 422, "validation_failed", "limit"],
      ["/partner/v1/consents?limit=-1", 422, "validation_failed", "limit"],
      ["/partner/v1/consent-links?limit=1000", 422, "validation_failed", "limit"],
      ["/partner/v1/disbursements?limit=0x10", 400, "invalid_argument", ""],
      // A field given twice is refused, not read as its last value.
      ["/partner/v1/consents?limit=1&limit=100", 400, "invalid_argument", ""],
      ["/partner/v1/books?from=2026-01-01&to=2026-01-31&from=2025-01-01", 400, "invalid_argument", ""],
      ["/partner/v1/consents?starting_after=cns_nope", 422, "validation_failed", "startingAfter"],
      [
        "/partner/v1/consents?starting_after=dsb_01J0000000000000000000000A",
        422,
        "validation_failed",
        "startingAfter",
      ],
      [
        "/partner/v1/disbursements?starting_after=%27%20or%201=1--",
        422,
        "validation_failed",
        "startingAfter",
      ],
      ["/partner/v1/consents?user_id=bob", 422, "validation_failed", "userId"],
      ["/partner/v1/disbursements?user_id=usr_%25", 422, "validation_failed", "userId"],
      ["/partner/v1/consents?status=PENDING", 400, "invalid_request", ""],
      ["/partner/v1/consent-links?status=ACTIVE", 400, "invalid_request", ""],
      ["/partner/v1/disbursements?status=99", 400, "invalid_request", ""],
      ["/partner/v1/consents?colour=red", 400, "invalid_argument", ""],
      ["/partner/v1/books/series?from=2026-01-01", 422, "validation_failed", "to"],
      ["/partner/v1/books/series?from=2026-02-30&to=2026-03-01", 422, "validation_failed", "from"],
      ["/partner/v1/books/series?from=2026-03-02&to=2026-03-01", 422, "validation_failed", "to"],
      ["/partner/v1/books/series?from=2025-01-01&to=2026-01-02", 422, "validation_failed", "to"],
      ["/partner/v1/books/series?from=0000-01-01&to=0000-01-02", 422, "validation_failed", "from"],
    ];
    for (const [path, status, code, field] of bad) {
      const res = await get(a.sandboxKey, path);
      expect(res.status, `${path} ${JSON.stringify(res.body)}`).toBe(status);
      expect(res.body.code, path).toBe(code);
      if (field) expect(res.body.details.fields[field], path).toBeDefined();
    }
    for (const [path, field] of [
      ["/partner/v1/consents", "consents"],
      ["/partner/v1/consent-links", "consentLinks"],
      ["/partner/v1/disbursements", "disbursements"],
    ] as const) {
      const one = await get(a.sandboxKey, `${path}?limit=1`);
      expect(one.body[field]).toHaveLength(1);
      expect(one.body.hasMore).toBe(true);
      expect((await get(a.sandboxKey, `${path}?limit=100`)).body[field]).toHaveLength(5);
      expect((await get(a.sandboxKey, `${path}?limit=0`)).body[field]).toHaveLength(5);
    }
    // A whole leap year is 366 days, and allowed.
    const year = await get(a.sandboxKey, "/partner/v1/books/series?from=2028-01-01&to=2028-12-31");
    expect(year.status).toBe(200);
    expect(year.body.days).toHaveLength(366);
  });
});

/**
 * Rows of `table` PostgreSQL read (by any scan) while `run` ran, in one transaction scoped to A's sandbox: the
 * difference of the backend's own counters before and after, which nothing else moves inside a transaction.
 */
async function rowsRead(table: string, run: (tx: Em) => Promise<unknown>): Promise<number> {
  return em().transactional(async (tx) => {
    scopeToTenant(tx, { partnerId: a.partnerId, environment: "sandbox" });
    const read = async () => {
      const [row] = await sql<{ n: string }>(
        tx,
        `select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::text as n
           from pg_stat_xact_user_tables where relname = $1`,
        [table],
      );
      return Number(row?.n ?? 0);
    };
    const before = await read();
    await run(tx);
    return (await read()) - before;
  });
}

describe("the cost of a page", () => {
  it("stays a handful of rows when another tenant stores thousands, and twice as many again", async () => {
    const now = new Date();
    const pages = {
      consents: (tx: Em) => consentRepository.listConsents(tx, {}, undefined, 3),
      consentsRevoked: (tx: Em) =>
        consentRepository.listConsents(tx, { status: "REVOKED" }, mine.consents[1], 3),
      consentsOfUser: (tx: Em) => consentRepository.listConsents(tx, { userId: userA }, undefined, 3),
      links: (tx: Em) => consentRepository.listLinks(tx, "PENDING", now, undefined, 3),
      disbursements: (tx: Em) => disbursementListRepository.page(tx, {}, now, undefined, 3),
      disbursementsDelivered: (tx: Em) =>
        disbursementListRepository.page(tx, { status: "DELIVERED" }, now, mine.disbursements[0], 3),
      series: (tx: Em) =>
        booksRepository.daily(
          tx,
          { partnerId: a.partnerId, environment: "sandbox" },
          new Date("2026-06-01T00:00:00Z"),
          new Date("2026-07-01T00:00:00Z"),
        ),
    };
    const table = (name: string) =>
      name.startsWith("links")
        ? "consent_links"
        : name.startsWith("series")
          ? "book_entries"
          : name.startsWith("consents")
            ? "consents"
            : "disbursements";
    const measure = async () => {
      await sql(em(), "analyze consents; analyze consent_links; analyze disbursements; analyze book_entries");
      const out: Record<string, number> = {};
      for (const [name, run] of Object.entries(pages)) out[name] = await rowsRead(table(name), run);
      return out;
    };
    // Thousands of another partner's rows, and of A's own other environment, sorting both before and after A's.
    await seed(b.partnerId, "sandbox", userB, 2000, "1B");
    await seed(b.partnerId, "sandbox", userB, 500, "00");
    await seed(a.partnerId, "production", liveUserA, 1500, "1C");
    const before = await measure();
    // Twice as many again.
    await seed(b.partnerId, "sandbox", userB, 4000, "2B");
    await seed(b.partnerId, "sandbox", userB, 1000, "01");
    await seed(a.partnerId, "production", liveUserA, 3000, "2C");
    const after = await measure();
    // A page of 3 reads a handful of rows, never a scan of another tenant's, however many they store. (Not
    // the same count each time: the planner may pick another of A's indexes after the second ANALYZE.)
    for (const [name, n] of Object.entries(before)) expect(n, `${name}, before`).toBeLessThanOrEqual(8);
    for (const [name, n] of Object.entries(after)) expect(n, `${name}, after`).toBeLessThanOrEqual(8);
    // And the answers are still only A's.
    const res = await get(a.sandboxKey, "/partner/v1/disbursements?limit=100");
    expect(res.body.disbursements.map((x: { id: string }) => x.id)).toEqual(mine.disbursements);
  });
});
