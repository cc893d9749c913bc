import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  InMemoryProcessedEventStore,
  PostgresProcessedEventStore,
  parseSignatureHeader,
  WebhookVerificationError,
} from "../../src/sdk/webhooks.ts";
import { createTestDatabase } from "../support/db.ts";

describe("processed event stores", () => {
  it("remembers ids for 30 days in memory", async () => {
    let now = Date.parse("2027-01-01T00:00:00Z");
    const store = new InMemoryProcessedEventStore({ now: () => now });
    expect(await store.has("evt_1")).toBe(false);
    await store.add("evt_1");
    expect(await store.has("evt_1")).toBe(true);
    now += 30 * 86_400_000;
    expect(await store.has("evt_1")).toBe(true);
    now += 1;
    expect(await store.has("evt_1")).toBe(false);
  });

  describe("in PostgreSQL", () => {
    let db: pg.Client;
    beforeAll(async () => {
      db = new pg.Client({ connectionString: await createTestDatabase() });
      await db.connect();
    });
    afterAll(() => db?.end());

    it("remembers ids across instances and commits the mark with the receiver's own writes", async () => {
      const query = db.query.bind(db) as never;
      const store = new PostgresProcessedEventStore(query, { table: "processed_events" });
      await store.ensureSchema();
      await store.ensureSchema();
      expect(await store.has("evt_a")).toBe(false);
      await db.query("begin");
      await store.add("evt_a", query);
      await db.query("rollback");
      expect(await store.has("evt_a")).toBe(false);
      await store.add("evt_a");
      expect(await new PostgresProcessedEventStore(query, { table: "processed_events" }).has("evt_a")).toBe(
        true,
      );
      await db.query("update processed_events set processed_at = now() - interval '31 days'");
      expect(await store.has("evt_a")).toBe(false);
      expect(await store.purge()).toBe(1);
      expect(() => new PostgresProcessedEventStore(query, { table: "x; drop table y" })).toThrow();
    });
  });
});

describe("signature header parsing", () => {
  it("reads t and every v1, ignores other schemes, and rejects a header without them", () => {
    const v = "a".repeat(64);
    expect(parseSignatureHeader(`t=1700000000,v1=${v},v0=zz,v1=${"b".repeat(64)}`)).toEqual({
      timestamp: 1_700_000_000,
      signatures: [v, "b".repeat(64)],
    });
    for (const bad of ["", "t=1", `v1=${v}`, "t=abc,v1=xyz", "garbage"]) {
      expect(() => parseSignatureHeader(bad)).toThrow(WebhookVerificationError);
    }
  });
});
