import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/entities.ts";
import { createOrm, migrate } from "../../src/platform/db/orm.ts";
import { listPartitions } from "../../src/platform/db/partitions.ts";
import { newId } from "../../src/platform/ids.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { ATTEMPTS, DELIVERIES, EVENTS } from "../../src/webhooks/webhook-partition.repository.ts";
import { createDatabaseMigratedTo } from "../support/db.ts";

// The migration that makes events, deliveries and attempts monthly partitions, run over a database that already
// holds them (docs/operations.md "Partitions"): no row moves, every row stays readable through the table it was
// in, the old table becomes the first partition, new rows go to this month's, and attempts go on numbering
// where they stopped.

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const BEFORE = "Migration20261129000000_instance_listeners";
let url: string;
let db: pg.Client;

beforeAll(async () => {
  url = await createDatabaseMigratedTo(BEFORE);
  db = new pg.Client({ connectionString: url });
  await db.connect();
});
afterAll(() => db?.end());

describe("the partitioning migration over a populated database", () => {
  it("keeps every row where it was read, as the first partition, and puts new rows in this month's", async () => {
    await db.query(
      `insert into partners (id, name, fee_rate_bps, created_at) values ('ptn_migr', 'Migr', 100, now())`,
    );
    await db.query(
      `insert into webhooks (id, partner_id, environment, url, events, status, secret_enc, created_at, updated_at)
       values ('whk_migr', 'ptn_migr', 'sandbox', 'https://hooks.example.com/m', '{*}', 'ACTIVE', '\\x00', now(), now())`,
    );
    const events: string[] = [];
    for (let i = 0; i < 50; i++) {
      const e = newId("evt");
      const d = newId("dlv");
      events.push(e);
      await db.query(
        `insert into events (id, partner_id, environment, type, body, created_at)
         values ($1, 'ptn_migr', 'sandbox', 'consent.granted', '{}', now())`,
        [e],
      );
      await db.query(
        `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, delivered_at, created_at)
         values ($1, $2, 'whk_migr', 'ptn_migr', 'sandbox', 'DELIVERED', now(), now())`,
        [d, e],
      );
      await db.query(
        `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, latency_ms)
         values ($1, 'whk_migr', 1, now(), true, 5)`,
        [d],
      );
    }
    const { rows: maxBefore } = await db.query<{ id: string }>(
      "select max(id)::text as id from webhook_attempts",
    );

    expect(await migrate(url, schema, logger)).toContain("Migration20261130000000_partitioned_history");

    const orm = await createOrm({ databaseUrl: url, schema, poolSize: 1, logger });
    try {
      for (const t of [EVENTS, DELIVERIES, ATTEMPTS]) {
        const parts = await listPartitions(orm.em.fork(), t);
        expect(parts[0]?.name).toBe(`${t.table}_before`);
        expect(parts.length).toBe(3);
      }
    } finally {
      await orm.close();
    }
    const count = async (text: string) => Number((await db.query(text)).rows[0].n);
    expect(await count("select count(*) as n from events")).toBe(50);
    expect(await count("select count(*) as n from only events_before")).toBe(50);
    expect(await count("select count(*) as n from webhook_deliveries")).toBe(50);
    expect(await count("select count(*) as n from webhook_attempts")).toBe(50);
    const { rows } = await db.query("select id from events where id = $1", [events[7]]);
    expect(rows).toEqual([{ id: events[7] }]);

    // New rows: in the partitions after `_before`; attempts numbered on from the last.
    const d = newId("dlv");
    await db.query(
      `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, latency_ms)
       values ($1, 'whk_migr', 1, now(), true, 5)`,
      [d],
    );
    const { rows: after } = await db.query<{ id: string; part: string }>(
      "select id::text, tableoid::regclass::text as part from webhook_attempts where delivery_id = $1",
      [d],
    );
    expect(BigInt(after[0]?.id ?? 0)).toBeGreaterThan(BigInt(maxBefore[0]?.id ?? 0));
    // The old table held every id before next month: this month's new ids still land in it.
    expect(after[0]?.part).toBe("webhook_attempts_before");
  });
});
