import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/entities.ts";
import { createOrm, type Orm } from "../../src/platform/db/orm.ts";
import { createLogger } from "../../src/platform/logger.ts";
import { everyTenant, scopeToTenant, TENANT } from "../../src/platform/tenancy.ts";
import { WebhookEntity } from "../../src/webhooks/webhook.entity.ts";
import { createTestDatabase } from "../support/db.ts";

// The tenancy boundary is one MikroORM filter, set once per request from the caller (ARCHITECTURE.md "Data").
let orm: Orm;
beforeAll(async () => {
  orm = await createOrm({
    databaseUrl: await createTestDatabase(),
    schema,
    poolSize: 2,
    logger: createLogger({ level: "silent" }),
  });
  const em = orm.em.fork();
  const now = new Date();
  await em.getConnection().execute(
    `insert into partners (id, name, fee_rate_bps, created_at) values
       ('ptn_01JTENANTA0000000000000000', 'A', 0, now()), ('ptn_01JTENANTB0000000000000000', 'B', 0, now())`,
  );
  for (const [id, partnerId, environment] of [
    ["whk_01JTENANTA0000000000000001", "ptn_01JTENANTA0000000000000000", "sandbox"],
    ["whk_01JTENANTA0000000000000002", "ptn_01JTENANTA0000000000000000", "production"],
    ["whk_01JTENANTB0000000000000001", "ptn_01JTENANTB0000000000000000", "sandbox"],
  ] as const) {
    em.create(WebhookEntity, {
      id,
      partnerId,
      environment,
      url: "https://example.com/h",
      description: "",
      events: ["*"],
      status: "ACTIVE",
      disabledReason: null,
      secretEnc: Buffer.from("x"),
      previousSecretEnc: null,
      previousSecretExpiresAt: null,
      createdAt: now,
      updatedAt: now,
      deletedAt: null,
    });
  }
  await em.flush();
});
afterAll(() => orm?.close());

/** The entities whose table has a `partner_id` column. */
const partnerOwned = () =>
  [...orm.getMetadata().getAll().values()].filter((m) =>
    m.props.some((p) => p.fieldNames?.[0] === "partner_id"),
  );

describe("the tenancy filter", () => {
  // API keys and the portal's people, sessions, invites and audit log aside: they are the partner's in both
  // environments, not one tenant's; the operator manages them, and a request finds its own key or session by
  // its hash, and every other query on them names the session's partner.
  it("is on every partner-owned entity (API keys and portal people aside)", () => {
    const owned = partnerOwned().map((m) => m.className);
    expect(owned.length).toBeGreaterThanOrEqual(8);
    const unfiltered = partnerOwned()
      .filter((m) => !m.filters?.[TENANT]?.default)
      .map((m) => m.className);
    expect(unfiltered.sort()).toEqual(
      ["ApiKey", "PortalAuditEvent", "PortalInvite", "PortalMember", "PortalSession"].sort(),
    );
  });

  it("refuses a query on a partner-owned entity that bypasses it, instead of reading every tenant's rows", async () => {
    await expect(orm.em.fork().find(WebhookEntity, {})).rejects.toThrow(
      /No arguments provided for filter 'tenant'/,
    );
    await expect(
      orm.em.fork().findOne(WebhookEntity, { id: "whk_01JTENANTB0000000000000001" }),
    ).rejects.toThrow(/filter 'tenant'/);
  });

  it("gives a scoped unit of work its tenant's rows only, in its environment only, in every fork and transaction", async () => {
    const em = orm.em.fork();
    scopeToTenant(em, { partnerId: "ptn_01JTENANTA0000000000000000", environment: "sandbox" });
    expect((await em.find(WebhookEntity, {})).map((w) => w.id)).toEqual(["whk_01JTENANTA0000000000000001"]);
    expect(await em.findOne(WebhookEntity, { id: "whk_01JTENANTB0000000000000001" })).toBeNull();
    expect(await em.findOne(WebhookEntity, { id: "whk_01JTENANTA0000000000000002" })).toBeNull();
    await em.transactional(async (tx) => {
      expect((await tx.find(WebhookEntity, {})).map((w) => w.id)).toEqual(["whk_01JTENANTA0000000000000001"]);
      expect(await tx.count(WebhookEntity, {})).toBe(1);
    });
    expect(await em.fork().count(WebhookEntity, {})).toBe(1);
  });

  it("lets system work read across tenants only when it says so on the query", async () => {
    expect(await orm.em.fork().count(WebhookEntity, {}, everyTenant)).toBe(3);
  });
});

describe("raw SQL", () => {
  const root = path.join(import.meta.dirname, "../../src");
  const sources = (readdirSync(root, { recursive: true }) as string[])
    .filter((f) => f.endsWith(".ts") && !f.startsWith("platform/db/migrations/"))
    .filter((f) => !f.endsWith(".repository.ts") && !f.endsWith(".entity.ts"));
  const text = (f: string) => readFileSync(path.join(root, f), "utf8");

  it("that chooses a tenant by hand (names partner_id) is written only in repositories", () => {
    // The list of sealed columns names the keys that bind them, for db:rekey.
    const offenders = sources.filter((f) => f !== "master-key.ts" && text(f).includes("partner_id"));
    expect(offenders).toEqual([]);
  });

  it("runs only in repositories and the few places that own no feature's table", () => {
    const allowed = [
      "platform/db/sql.ts", // defines it
      "platform/db/purge.ts", // the counted and batched deletes repositories' purges run through it
      "platform/db/partitions.ts", // makes, lists and drops partitions, for the features whose tables they are
      "platform/crypto/data-keys.ts", // owns data_keys
      "platform/http/listener-registry.ts", // owns instance_listeners
      "platform/metrics-gauges.ts", // the queue and backlog gauges of /metrics, read-only
      "platform/db/lsn.ts", // the primary's WAL position, no table
      "platform/db/replicas.ts", // a replica's replay position, no table
      "master-key.ts", // db:rekey re-seals every sealed column, an operator's tool
    ];
    const offenders = sources.filter((f) => !allowed.includes(f) && /\bsql\s*[<(]/.test(text(f)));
    expect(offenders).toEqual([]);
  });
});
