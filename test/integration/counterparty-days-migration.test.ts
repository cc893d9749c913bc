import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/entities.ts";
import { migrate } from "../../src/platform/db/orm.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createDatabaseMigratedTo } from "../support/db.ts";

// The migration that counts each user's counterparties per last day (ledger_counterparty_days), run over a
// database that already holds counterparties: every one is counted on its last day, in its direction and scope,
// and the index the counts replace is gone.

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const BEFORE = "Migration20261201000000_delivery_owner_statistics";
let url: string;
let db: pg.Client;

beforeAll(async () => {
  url = await createDatabaseMigratedTo(BEFORE);
  db = new pg.Client({ connectionString: url });
  await db.connect();
});
afterAll(() => db?.end());

describe("the counterparty-days migration over a populated database", () => {
  it("counts every counterparty on its last day, by user, direction and scope, and drops the index it replaces", async () => {
    for (const u of ["usr_migr_a", "usr_migr_b"])
      await db.query(
        `insert into users (id, environment, phone_hash, phone_enc, phone_last4, segment, created_at, updated_at)
         values ($1, 'sandbox', $2, '\\x00', '0000', 'trader', now(), now())`,
        [u, randomBytes(32)],
      );
    // 300 counterparties: two users, both directions, two scopes, last met on one of 20 days.
    await db.query(
      `insert into ledger_counterparties (user_id, direction, counterparty_hash, scope, first_day, last_day)
       select case when n % 2 = 0 then 'usr_migr_a' else 'usr_migr_b' end,
              case when n % 3 = 0 then 'OUT' else 'IN' end,
              sha256(convert_to('cp' || n, 'UTF8')),
              case when n % 5 = 0 then 'ptn_migr' else '' end,
              current_date - 400, current_date - (n % 20)
         from generate_series(1, 300) n`,
    );

    expect(await migrate(url, schema, logger)).toContain("Migration20261202000000_counterparty_days");

    const grouped = (count: string, table: string) =>
      db.query(
        `select user_id, direction, scope, last_day::text, ${count}::int as n from ${table}
          group by user_id, direction, scope, last_day order by 1, 2, 3, 4`,
      );
    const truth = await grouped("count(*)", "ledger_counterparties");
    const kept = await grouped("sum(parties)", "ledger_counterparty_days");
    // 20 last days (each with its user and scope) in two directions, 7 or 8 counterparties on each.
    expect(truth.rows.length).toBe(40);
    expect(kept.rows).toEqual(truth.rows);
    const { rows } = await db.query(
      "select count(*)::int as n from pg_indexes where indexname = 'ledger_counterparties_by_window'",
    );
    expect(rows[0].n).toBe(0);
  });
});
