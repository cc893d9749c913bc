// The data set of `npm run bench:scale`, written straight into PostgreSQL by set-based SQL (generate_series, no
// round trip per row) so that ten times today's bench data builds in minutes. Every value is a function of its
// row's numbers (hashint8extended, md5), so the same size gives the same rows: the seed is fixed.
//
// One unit (1×) is today's bench data: 10,000 users, every 100th a heavy trader with 50,000 ledger entries and
// the others 50 (5.5 M entries), and 100 partners (production) with two webhooks each, 10,000 events a year
// each (1 M events; a fifth go to both webhooks, every seventh delivery took three attempts) and 1,000
// disbursements a year each, with three monthly installments and their book entries. `grow(from, to)` adds the
// users and partners of units [from, to), so 10× is the 1× set grown by nine more units.
//
// The ledger's raw entries are written here; their roll-ups are not: the bench has the service rebuild them
// with its own statement (RebuildLedgerRollups, the operator's `ledger rebuild`).
import type pg from "pg";

/** The size of one unit (1×); `unit` scales it for quick runs (BENCH_SCALE_UNIT). */
export function unitShape(unit: number) {
  return {
    users: Math.max(200, Math.round(10_000 * unit)),
    heavyEvery: 100,
    heavyEntries: 50_000,
    lightEntries: 50,
    partners: Math.max(2, Math.round(100 * unit)),
    eventsPerPartner: 10_000,
    disbursementsPerPartner: 1_000,
  };
}
/** What {@link unitShape} returns. */
export type Shape = ReturnType<typeof unitShape>;

const DAY_MS = 86_400_000;
const B32 = "'{0,1,2,3,4,5,6,7,8,9,A,B,C,D,E,F,G,H,J,K,M,N,P,Q,R,S,T,V,W,X,Y,Z}'::text[]";

/** SQL for a ULID whose time is `ms` (a bigint expression, milliseconds) and whose 80 bits come from `seed`. */
const ulid = (ms: string, seed: string) =>
  `(${Array.from({ length: 10 }, (_, i) => `(${B32})[(((${ms}) >> ${45 - i * 5}) & 31) + 1]`).join(" || ")} || upper(substr(md5((${seed})::text), 1, 16)))`;
/** SQL for a deterministic number in [0, m) from the integer expression `n` and the salt `k`. */
const hash = (n: string, k: number, m: number | string) =>
  `(abs(hashint8extended((${n})::bigint, ${k})) % ${m})`;

/** The user id of user number `u` (SQL). */
export const userIdSql = (u: string) => `('usr_scale' || ${u})`;
/** The user id of user number `u`. */
export const userId = (u: number) => `usr_scale${u}`;
/** The partner id of partner number `p` (SQL): a ULID of a fixed time, so the same in every run. */
const partnerIdSql = (p: string) => `('ptn_' || ${ulid("1700000000000", `'ptn' || ${p}`)})`;
const webhookIdSql = (p: string, w: string) =>
  `('whk_' || ${ulid("1700000000000", `'whk' || ${p} || ':' || ${w}`)})`;

/** Runs `statements` on the pool, `parallel` at a time. */
async function runAll(pool: pg.Pool, statements: [string, unknown[]][], parallel = 2): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < statements.length) {
        const [text, params] = statements[next++] as [string, unknown[]];
        await pool.query(text, params);
      }
    }),
  );
}

const chunks = (from: number, to: number, size: number) => {
  const out: [number, number][] = [];
  for (let a = from; a < to; a += size) out.push([a, Math.min(to, a + size)]);
  return out;
};

/** Users [from, to) of the shape's units, and their raw ledger entries over the 400 days before `now`. */
async function growUsers(pool: pg.Pool, s: Shape, from: number, to: number, now: number): Promise<void> {
  const [u0, u1] = [Math.round(from * s.users), Math.round(to * s.users)];
  await runAll(
    pool,
    chunks(u0, u1, 50_000).map(([a, b]) => [
      `insert into users (id, environment, phone_hash, phone_enc, phone_last4, segment, created_at, updated_at)
       select ${userIdSql("u")}, 'production', sha256(convert_to('phone' || u, 'UTF8')), '\\x00', lpad((u % 10000)::text, 4, '0'),
              case when u % ${s.heavyEvery} = 0 then 'trader' else (array['salaried', 'gig', 'trader', 'other'])[u % 4 + 1] end,
              to_timestamp($3 / 1000.0) - interval '400 days', to_timestamp($3 / 1000.0)
         from generate_series($1::bigint, $2::bigint - 1) u`,
      [a, b, now],
    ]),
  );
  const entries = (users: string, count: number, parties: number): string => `
    insert into ledger_entries (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, day, scope)
    select 'e' || u || '_' || n, ${userIdSql("u")}, 100 + ${hash("u * 100000 + n", 1, 4_999_900)},
           case when ${hash("u * 100000 + n", 2, 3)} = 0 then 'OUT' else 'IN' end,
           sha256(convert_to(u || ':cp' || ${hash("u * 100000 + n", 3, parties)}, 'UTF8')), 'transfer',
           at, (at at time zone 'UTC')::date, ''
      from (select u, n, to_timestamp($3 / 1000.0) - ${hash("u * 100000 + n", 4, 400 * DAY_MS)} * interval '1 millisecond' as at
              from ${users}, generate_series(0, ${count - 1}) n) x`;
  const heavy = `generate_series($1::bigint, $2::bigint - 1) u`;
  const light = `generate_series($1::bigint, $2::bigint - 1) u`;
  const statements: [string, unknown[]][] = [];
  // Heavy traders five at a time (250,000 rows), the others 5,000 at a time.
  const firstHeavy = Math.ceil(u0 / s.heavyEvery) * s.heavyEvery;
  for (let u = firstHeavy; u < u1; u += 5 * s.heavyEvery) {
    for (let k = 0; k < 5 && u + k * s.heavyEvery < u1; k++) {
      const h = u + k * s.heavyEvery;
      statements.push([entries(heavy, s.heavyEntries, 2_000), [h, h + 1, now]]);
    }
  }
  for (const [a, b] of chunks(u0, u1, 5_000))
    statements.push([
      entries(`(select u from ${light} where u % ${s.heavyEvery} <> 0) us`, s.lightEntries, 20),
      [a, b, now],
    ]);
  await runAll(pool, statements);
}

/** Partners [from, to) of the shape's units, each with two webhooks. */
async function growPartners(pool: pg.Pool, s: Shape, from: number, to: number, now: number): Promise<void> {
  const [p0, p1] = [Math.round(from * s.partners), Math.round(to * s.partners)];
  await pool.query(
    `insert into partners (id, name, fee_rate_bps, created_at)
     select ${partnerIdSql("p")}, 'Scale Lender ' || p, 100, to_timestamp($3 / 1000.0) - interval '2 years'
       from generate_series($1::bigint, $2::bigint - 1) p`,
    [p0, p1, now],
  );
  await pool.query(
    `insert into webhooks (id, partner_id, environment, url, events, status, secret_enc, created_at, updated_at)
     select ${webhookIdSql("p", "w")}, ${partnerIdSql("p")}, 'production', 'https://hooks.example.com/' || p || '/' || w,
            '{*}', 'ACTIVE', '\\x00', to_timestamp($3 / 1000.0) - interval '2 years', to_timestamp($3 / 1000.0)
       from generate_series($1::bigint, $2::bigint - 1) p, generate_series(0, 1) w`,
    [p0, p1, now],
  );
}

/**
 * Events of partners [p0, p1), `perPartner` each, spread evenly over [start, end) (ms), with their deliveries
 * (every event to one webhook, every fifth to both), all DELIVERED, and their attempts (every seventh delivery
 * failed twice first). `salt` keeps the ids of different calls apart.
 */
function eventsStatement(): string {
  const at = `($3::bigint + (e * ($4::bigint - $3::bigint)) / $5::bigint + ${hash("p * 1000003 + e + $6::bigint", 5, 60_000)})`;
  return `
    with base as (
      select p, e, ${at} as ms from generate_series($1::bigint, $2::bigint - 1) p, generate_series(0, $5::bigint - 1) e
    ),
    ev as (
      insert into events (id, partner_id, environment, type, body, created_at)
      select 'evt_' || ${ulid("ms", "'evt' || p || ':' || e || ':' || $6::bigint")}, ${partnerIdSql("p")}, 'production',
             (array['consent.granted', 'consent.revoked', 'standing.tier_changed', 'DISBURSEMENT_DELIVERED',
                    'REPAYMENT_COLLECTED', 'REPAYMENT_FAILED'])[e % 6 + 1],
             '{"id":"evt_' || p || '_' || e || '","type":"DISBURSEMENT_DELIVERED","createdAt":"' || to_timestamp(ms / 1000.0) ||
               '","payload":{"disbursementId":"dsb_' || md5(p || ':' || e) || '","userId":"usr_scale' || (e % 10000) ||
               '","principalKobo":"2500000","feeKobo":"25000","status":"DELIVERED"}}',
             to_timestamp(ms / 1000.0)
        from base
      returning id, partner_id, created_at
    ),
    dl as (
      insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, attempts,
                                      last_status_code, last_latency_ms, first_attempt_at, delivered_at, created_at)
      select 'dlv_' || ${ulid("ms + 1", "'dlv' || p || ':' || e || ':' || w || ':' || $6::bigint")},
             'evt_' || ${ulid("ms", "'evt' || p || ':' || e || ':' || $6::bigint")}, ${webhookIdSql("p", "w")}, ${partnerIdSql("p")},
             'production', 'DELIVERED', case when (p + e + w) % 7 = 0 then 3 else 1 end, 200, 40 + ${hash("e", 6, 200)},
             to_timestamp((ms + 5) / 1000.0),
             to_timestamp((ms + case when (p + e + w) % 7 = 0 then 40000 else 50 end) / 1000.0),
             to_timestamp(ms / 1000.0)
        from base, generate_series(0, 1) w
       where w = e % 2 or e % 5 = 0
      returning id, webhook_id, attempts, created_at
    )
    insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, status_code, latency_ms)
    select dl.id, dl.webhook_id, a, dl.created_at + (a - 1) * interval '15 seconds', a = dl.attempts,
           case when a = dl.attempts then 200 else 503 end, 40
      from dl, generate_series(1, dl.attempts) a`;
}

/** A year of events to `now` for partners [from, to) of the shape's units, ten partners a statement. */
async function growEvents(pool: pg.Pool, s: Shape, from: number, to: number, now: number): Promise<void> {
  const [p0, p1] = [Math.round(from * s.partners), Math.round(to * s.partners)];
  await runAll(
    pool,
    chunks(p0, p1, 10).map(([a, b]) => [
      eventsStatement(),
      [a, b, now - 365 * DAY_MS, now - 60_000, s.eventsPerPartner, 0],
    ]),
  );
}

/** The start and end (ms) of the month {@link expiredMonth} writes. */
export function expiredMonthOf(now: number, retentionDays: number): [number, number] {
  const edge = new Date(now - (retentionDays + 15) * DAY_MS);
  return [
    Date.UTC(edge.getUTCFullYear(), edge.getUTCMonth() - 1, 1),
    Date.UTC(edge.getUTCFullYear(), edge.getUTCMonth(), 1),
  ];
}

/**
 * A calendar month of events (with their deliveries and attempts) of every partner of the first `factor` units:
 * the last UTC month that ended at least 15 days (a delivery's retry window and a day) before the retention
 * cut-off `retentionDays` before `now`, so wholly past retention, with nothing else in it. What one retention
 * pass removes. Returns how many events.
 */
export async function expiredMonth(
  pool: pg.Pool,
  s: Shape,
  factor: number,
  now: number,
  retentionDays: number,
): Promise<number> {
  const partners = Math.round(factor * s.partners);
  const perPartner = Math.round(s.eventsPerPartner / 12);
  const [start, end] = expiredMonthOf(now, retentionDays);
  await runAll(
    pool,
    chunks(0, partners, 10).map(([a, b]) => [
      eventsStatement(),
      [a, b, start, end - 2 * 60_000, perPartner, 1_000_000 * factor],
    ]),
  );
  return partners * perPartner;
}

/** A year of disbursements for partners [from, to), with their installments and book entries. */
async function growDisbursements(
  pool: pg.Pool,
  s: Shape,
  from: number,
  to: number,
  now: number,
): Promise<void> {
  const [p0, p1] = [Math.round(from * s.partners), Math.round(to * s.partners)];
  const users = Math.round(to * s.users);
  const statement = `
    with base as (
      select p, d, $3::bigint - 365 * ${DAY_MS}::bigint + (d * 365 * ${DAY_MS}::bigint) / $4::bigint as ms,
             100000 * (10 + ${hash("p * 100003 + d", 7, 490)}) as principal, ${hash("p * 100003 + d", 8, users)} as u
        from generate_series($1::bigint, $2::bigint - 1) p, generate_series(0, $4::bigint - 1) d
    ),
    ds as (
      insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                 destination, reference, schedule_accepted_at, provider, created_at, processing_at,
                                 delivered_at, acceptance_method, accepted_total_kobo)
      select 'dsb_' || ${ulid("ms", "'dsb' || p || ':' || d")}, ${partnerIdSql("p")}, 'production', ${userIdSql("u")},
             'DELIVERED', principal, principal / 100, 100, 'WALLET', 'ref-' || d, to_timestamp((ms + 60000) / 1000.0),
             'paystack', to_timestamp(ms / 1000.0), to_timestamp((ms + 61000) / 1000.0), to_timestamp((ms + 62000) / 1000.0),
             'OTP_SMS', principal + principal / 10
        from base
      returning id, partner_id, principal_kobo, fee_kobo, created_at
    ),
    ins as (
      insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, next_attempt_at, collected_at,
                                collected_reference)
      select 'rpy_' || ${ulid("(extract(epoch from ds.created_at) * 1000)::bigint", "ds.id || ':' || k")}, ds.id, k,
             (ds.created_at + k * interval '30 days')::date, (ds.principal_kobo + ds.principal_kobo / 10) / 3,
             case when ds.created_at + k * interval '30 days' < to_timestamp($3 / 1000.0) then 'COLLECTED' else 'SCHEDULED' end,
             case when ds.created_at + k * interval '30 days' < to_timestamp($3 / 1000.0) then null
                  else ds.created_at + k * interval '30 days' end,
             case when ds.created_at + k * interval '30 days' < to_timestamp($3 / 1000.0) then ds.created_at + k * interval '30 days' end,
             case when ds.created_at + k * interval '30 days' < to_timestamp($3 / 1000.0) then 'col-' || ds.id || '-' || k end
        from ds, generate_series(1, 3) k
      returning id, disbursement_id, amount_kobo, collected_at
    ),
    books as (
      insert into book_entries (partner_id, environment, disbursement_id, installment_id, kind, amount_kobo, booked_at)
      select partner_id, 'production', id, null, kind, amount, created_at + interval '62 seconds'
        from ds, lateral (values ('PRINCIPAL_OUT', -principal_kobo), ('FEE', -fee_kobo)) v (kind, amount)
    )
    insert into book_entries (partner_id, environment, disbursement_id, installment_id, kind, amount_kobo, booked_at)
    select ds.partner_id, 'production', ins.disbursement_id, ins.id, 'REPAYMENT_IN', ins.amount_kobo, ins.collected_at
      from ins join ds on ds.id = ins.disbursement_id
     where ins.collected_at is not null`;
  await runAll(
    pool,
    chunks(p0, p1, 20).map(([a, b]) => [statement, [a, b, now, s.disbursementsPerPartner]]),
  );
}

/**
 * Adds units [from, to) of the data set (1× is `grow(0, 1)`, 10× then `grow(1, 10)`) as of `now` (ms): users
 * and their raw ledger entries, partners, webhooks, a year of events, deliveries and attempts, disbursements,
 * installments and book entries. Roll-ups are left to the service's rebuild.
 */
export async function grow(pool: pg.Pool, s: Shape, from: number, to: number, now: number): Promise<void> {
  await growPartners(pool, s, from, to, now);
  await growUsers(pool, s, from, to, now);
  await growEvents(pool, s, from, to, now);
  await growDisbursements(pool, s, from, to, now);
}

/** The partner id of partner number `p`, read back from the database (it is computed in SQL). */
export async function partnerId(pool: pg.Pool, p: number): Promise<string> {
  const { rows } = await pool.query(`select ${partnerIdSql("$1::bigint")} as id`, [p]);
  return rows[0].id;
}

/** Number of raw ledger entries of the first `factor` units. */
export const entriesOf = (s: Shape, factor: number) => {
  const users = Math.round(factor * s.users);
  const heavy = Math.ceil(users / s.heavyEvery);
  return heavy * s.heavyEntries + (users - heavy) * s.lightEntries;
};
