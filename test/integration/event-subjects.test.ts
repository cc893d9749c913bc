import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { monthStart } from "../../src/platform/db/partitions.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { newId, ulid } from "../../src/platform/ids.ts";
import type { Tenant } from "../../src/platform/tenancy.ts";
import { type EventFilter, eventsPage } from "../../src/webhooks/delivery-log.repository.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// ListEvents by what an event is about (`user_id`, `object_id`): on a tenant with many events, each filter is a
// range of its partial index on every monthly partition, never a scan of the tenant's events.
const EVENTS = 60_000;
const USERS = 3_000;
let t: TestApp;
let tenant: Tenant;
const em = () => t.app.orm.em.fork();

beforeAll(async () => {
  t = await startTestApp({ config: { role: "api" } });
  const p = await createPartner(t);
  tenant = { partnerId: p.partnerId, environment: "sandbox" };
  const hook = await createWebhook(t.partnerUrl, p.sandboxKey, {
    url: "http://127.0.0.1:9/hooks",
    events: ["*"],
  });
  // Every event about a user; two in three about a disbursement or consent too (a standing change is not);
  // some of them older, without a subject, as events raised before the columns were added are.
  // Spread over this month's partition and the two made ahead, so that every partition has rows to plan for.
  const ids = Array.from(
    { length: EVENTS },
    (_, i) => `evt_${ulid(monthStart(new Date(), i % 3).getTime() + i)}`,
  );
  const users = ids.map((_, i) => (i % 10 === 0 ? null : `usr_seed${i % USERS}`));
  const objects = ids.map((_, i) =>
    i % 3 === 0 || !users[i] ? null : `dsb_SEED${String(i % 20_000).padStart(22, "0")}`,
  );
  await sql(
    em(),
    `insert into events (id, partner_id, environment, type, body, created_at, user_id, object_id)
     select u.id, $2, 'sandbox', 'REPAYMENT_COLLECTED', '{}', now() - (u.n || ' seconds')::interval, u.user_id, u.object_id
       from unnest($1::text[], $3::text[], $4::text[]) with ordinality as u (id, user_id, object_id, n)`,
    [ids, tenant.partnerId, users, objects],
  );
  await sql(
    em(),
    `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, attempts, created_at)
     select 'dlv_' || substr(e, 5), e, $2, $3, 'sandbox', 'DELIVERED', 1, now() from unnest($1::text[]) as e`,
    [ids, hook.id, tenant.partnerId],
  );
  await sql(em(), "analyze events");
  await sql(em(), "analyze webhook_deliveries");
}, 120_000);
afterAll(() => t?.stop());

/** The plan's nodes that read `events`' partitions: their kind and the index they use, if any. */
async function eventScans(filter: EventFilter, after?: { createdAt: Date; id: string }) {
  const page = eventsPage(tenant, filter, after, 21);
  const [row] = await sql<{ "QUERY PLAN": unknown }>(em(), `explain (format json) ${page.text}`, page.params);
  const scans: { kind: string; index?: string }[] = [];
  const walk = (node: Record<string, unknown>) => {
    if (typeof node["Relation Name"] === "string" && node["Relation Name"].startsWith("events"))
      scans.push({ kind: String(node["Node Type"]), index: node["Index Name"] as string | undefined });
    if (node["Node Type"] === "Bitmap Index Scan" && String(node["Index Name"]).startsWith("events"))
      scans.push({ kind: "Bitmap Index Scan", index: String(node["Index Name"]) });
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
  };
  const plan = row?.["QUERY PLAN"] as { Plan: Record<string, unknown> }[] | undefined;
  walk(plan?.[0]?.Plan ?? {});
  return scans;
}

/** The names of a partitioned index's partitions' indexes. */
const partsOf = async (index: string) =>
  (
    await sql<{ name: string }>(
      em(),
      `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = $1::regclass`,
      [index],
    )
  ).map((r) => r.name);

describe("ListEvents by subject on a tenant with many events", () => {
  it("reads a range of events_by_object or events_by_user, never a scan", async () => {
    const byObject = await partsOf("events_by_object");
    const byUser = await partsOf("events_by_user");
    expect(byObject.length).toBeGreaterThanOrEqual(3);
    const [newest] = await sql<{ id: string; created_at: Date }>(
      em(),
      "select id, created_at from events where partner_id = $1 and user_id = 'usr_seed7' order by created_at desc, id desc limit 1",
      [tenant.partnerId],
    );
    for (const [filter, indexes, after] of [
      [{ type: "", userId: "", objectId: `dsb_SEED${"7".padStart(22, "0")}` }, byObject, undefined],
      [
        { type: "REPAYMENT_COLLECTED", userId: "", objectId: `dsb_SEED${"7".padStart(22, "0")}` },
        byObject,
        undefined,
      ],
      [{ type: "", userId: "usr_seed7", objectId: "" }, byUser, undefined],
      [
        { type: "", userId: "usr_seed7", objectId: "" },
        byUser,
        { createdAt: newest?.created_at, id: newest?.id },
      ],
    ] as const) {
      const scans = await eventScans(filter, after as { createdAt: Date; id: string } | undefined);
      const why = JSON.stringify({ filter, scans });
      expect(scans.length, why).toBeGreaterThan(0);
      for (const scan of scans) {
        expect(scan.kind, why).not.toBe("Seq Scan");
        if (scan.index) expect(indexes, why).toContain(scan.index);
      }
    }
  });

  it("finds exactly a subject's events, newest first, and none of the events without one", async () => {
    const rows = async (filter: EventFilter) => {
      const page = eventsPage(tenant, filter, undefined, 1_000);
      return (await sql<{ id: string }>(em(), page.text, page.params)).map((r) => r.id);
    };
    const expected = await sql<{ id: string }>(
      em(),
      `select id from events where partner_id = $1 and user_id = 'usr_seed7' order by created_at desc, id desc`,
      [tenant.partnerId],
    );
    expect(await rows({ type: "", userId: "usr_seed7", objectId: "" })).toEqual(expected.map((r) => r.id));
    expect(expected.length).toBe(EVENTS / USERS);
    expect(await rows({ type: "", userId: "usr_nobody", objectId: "" })).toEqual([]);
    const other = { partnerId: newId("ptn"), environment: "sandbox" as const };
    const page = eventsPage(other, { type: "", userId: "usr_seed7", objectId: "" }, undefined, 10);
    expect(await sql(em(), page.text, page.params)).toEqual([]);
  });
});
