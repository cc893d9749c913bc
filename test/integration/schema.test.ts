import { defineEntity, p } from "@mikro-orm/core";
import { MikroORM } from "@mikro-orm/postgresql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { entities, routines, schema } from "../../src/entities.ts";
import { DataKeyEntity } from "../../src/platform/crypto/data-key.entity.ts";
import { createOrm, type Orm } from "../../src/platform/db/orm.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { createTestDatabase } from "../support/db.ts";

// The migrations are the schema; the entities must describe it exactly. MikroORM's own schema diff, from
// the entities to a freshly migrated database, is the judge: any statement it would run is a disagreement.

const logger = createLogger({ level: "warn", write: (line) => process.stderr.write(`${line}\n`) });
let url: string;
let orm: Orm;

beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm({ databaseUrl: url, schema, poolSize: 2, logger });
});
afterAll(() => orm?.close());

/** What MikroORM would run to make the database match `target`'s entities. */
const drift = async (target: MikroORM) => (await target.schema.getUpdateSchemaSQL({ wrap: false })).trim();

/** `data_keys` as an entity that disagrees with its migration: one column of another type, one too many. */
const DriftedDataKeyEntity = defineEntity({
  name: "DataKey",
  tableName: "data_keys",
  properties: {
    label: p.text().primary(),
    keyEnc: p.text(),
    createdAt: p.datetime(),
    rotatedAt: p.datetime().nullable(),
  },
});

describe("the entities and the migrations", () => {
  it("agree: MikroORM's schema diff against the migrated database is empty", async () => {
    const statements = await drift(orm);
    const why = `the entities disagree with the migrations; MikroORM would run:\n${statements}`;
    expect(statements, why).toBe("");
  });

  it("leave pg-boss's schema and the migrator's own table out of the comparison, though they exist", async () => {
    const [counts] = await sql<{ boss: number; migrations: number }>(
      orm.em.fork(),
      `select count(*) filter (where table_schema = 'pgboss')::int as boss,
              count(*) filter (where table_schema = 'public' and table_name = 'schema_migrations')::int as migrations
         from information_schema.tables`,
    );
    expect(counts?.boss).toBeGreaterThan(0);
    expect(counts?.migrations).toBe(1);
  });

  it("disagree when an entity does, and the diff names the columns", async () => {
    const drifted = await MikroORM.init({
      clientUrl: url,
      entities: [...entities.filter((e) => e !== DataKeyEntity), DriftedDataKeyEntity],
      routines,
      // The migrator's own table, as the service's ORM knows it (else it would be a table without an entity).
      migrations: { tableName: orm.config.get("migrations").tableName },
      pool: { min: 0, max: 1 },
      allowGlobalContext: false,
      ensureDatabase: false,
      debug: false,
    });
    try {
      const statements = await drift(drifted);
      expect(statements).toMatch(/alter table "data_keys" add "rotated_at" timestamptz null/);
      expect(statements).toMatch(/alter table "data_keys" alter column "key_enc" type text/);
      // Only the drifted table: the comparison itself is sound, not failing on everything.
      for (const statement of statements.split(";").filter((s) => s.trim())) {
        expect(statement).toContain('"data_keys"');
      }
    } finally {
      await drifted.close();
    }
  });

  it("cover every table: each table in public, but the migrator's own and partitions, has an entity", async () => {
    // A partition (events_2026_11) is its partitioned table's: the entity of `events` describes it.
    const tables = await sql<{ table_name: string }>(
      orm.em.fork(),
      `select table_name from information_schema.tables t
        where table_schema = 'public' and table_type = 'BASE TABLE' and table_name <> 'schema_migrations'
          and not exists (select 1 from pg_inherits i join pg_class c on c.oid = i.inhrelid
                           where c.relname = t.table_name)
        order by table_name`,
    );
    const mapped = [...orm.getMetadata().getAll().values()].map((meta) => meta.tableName).sort();
    expect(mapped).toEqual(tables.map((t) => t.table_name));
  });
});
