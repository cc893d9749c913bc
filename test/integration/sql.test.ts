import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// Hot reads run as named prepared statements on MikroORM's own pool (snapshots); these check that they
// answer exactly what the plain path answers, on every pooled connection, and never leave a transaction.
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ config: { role: "api" } });
});
afterAll(() => t?.stop());

const em = () => t.app.orm.em.fork();

describe("prepared statements", () => {
  it("answer what the plain path answers, timestamps included", async () => {
    const text = "select $1::text as name, $2::timestamptz as seen_at, $3::int + 1 as n";
    const params = ["kemi", new Date("2027-01-02T03:04:05.678Z"), 41];
    const plain = await sql(em(), text, params);
    const prepared = await sql(em(), text, params, { prepare: true });
    expect(prepared).toEqual(plain);
    expect(prepared[0]?.seen_at).toEqual(new Date("2027-01-02T03:04:05.678Z"));
    expect(prepared[0]?.n).toBe(42);
  });

  it("work on every connection of the pool, many times over, with fresh parameters each time", async () => {
    const text = "select $1::int * 2 as doubled, pg_backend_pid() as pid";
    const rows = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        sql<{ doubled: number; pid: number }>(em(), text, [i], { prepare: true }),
      ),
    );
    expect(rows.map((r) => r[0]?.doubled)).toEqual(Array.from({ length: 60 }, (_, i) => i * 2));
    // More than one server connection took part, and each kept the statement for later runs.
    expect(new Set(rows.map((r) => r[0]?.pid)).size).toBeGreaterThan(1);
  });

  it("are kept by the server for the connection, where the plain path leaves nothing", async () => {
    const mine = (tag: string) =>
      `select statement from pg_prepared_statements where statement like '%${tag}%' and not from_sql`;
    const prepared = await sql<{ statement: string }>(em(), mine("kept-prepared"), [], { prepare: true });
    expect(prepared.map((r) => r.statement)).toEqual([mine("kept-prepared")]);
    expect(await sql(em(), mine("kept-plain"), [])).toEqual([]);
  });

  it("never mix up two statements", async () => {
    const [a] = await sql<{ v: string }>(em(), "select 'a'::text as v", [], { prepare: true });
    const [b] = await sql<{ v: string }>(em(), "select 'b'::text as v", [], { prepare: true });
    const [a2] = await sql<{ v: string }>(em(), "select 'a'::text as v", [], { prepare: true });
    expect([a?.v, b?.v, a2?.v]).toEqual(["a", "b", "a"]);
  });

  it("run inside the caller's transaction when there is one, seeing its uncommitted writes", async () => {
    const name = `prepared-${Date.now()}`;
    await expect(
      em().transactional(async (tx) => {
        await sql(tx, "insert into partners (id, name, fee_rate_bps, created_at) values ($1, $2, 0, now())", [
          "ptn_PREPAREDTXTEST00000000000",
          name,
        ]);
        const seen = await sql(tx, "select name from partners where name = $1", [name], { prepare: true });
        expect(seen).toEqual([{ name }]);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await sql(em(), "select name from partners where name = $1", [name], { prepare: true })).toEqual(
      [],
    );
  });

  it("report a bad statement as an error and keep the pool usable", async () => {
    await expect(
      sql(em(), "select * from no_such_table where id = $1", [1], { prepare: true }),
    ).rejects.toThrow(/no_such_table/);
    const [row] = await sql<{ ok: number }>(em(), "select 1 as ok", [], { prepare: true });
    expect(row?.ok).toBe(1);
  });
});
