import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SetPartnerLimitsRequest } from "../../gen/internal/v1/partners_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { errorInfoOf, rest } from "../support/clients.ts";

// An operator's dedicated-capacity change for one partner must touch nothing else: not another partner, not
// the partner's other environment, not another key's bucket. Values that would switch a limit off or make it
// absurd are refused naming the field, and nothing is written; unknown partners and keys are not_found.

const defaults = {
  read: { capacity: 40, refillPerSecond: 0.001 },
  write: { capacity: 40, refillPerSecond: 0.001 },
};
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { rateLimits: defaults } });
});
afterAll(() => t?.stop());

const policy = async (key: string) =>
  (await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key })).headers.get("ratelimit-policy");
const bucketRow = async (bucket: string) =>
  (
    await sql<{ tokens: number; refilled_at: Date }>(
      t.app.orm.em.fork(),
      "select tokens, refilled_at from rate_limit_buckets where bucket_key = $1",
      [bucket],
    )
  )[0];

/** The refusal of a call: its code and the fields it names. */
async function refusal(call: Promise<unknown>) {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConnectError);
  const info = errorInfoOf(err);
  const fields = JSON.parse(info?.metadata.details ?? "{}").fields ?? {};
  return {
    code: info?.reason,
    connect: (err as ConnectError).code,
    fields: fields as Record<string, string>,
  };
}

describe("one partner's limits", () => {
  it("never change another partner's, the other environment's, or another key's bucket", async () => {
    const p = await createPartner(t);
    const q = await createPartner(t);
    for (const key of [p.sandboxKey, p.liveKey, q.sandboxKey, q.liveKey])
      expect(await policy(key)).toContain("q=40");
    const before = await Promise.all(
      [q.liveKeyId, q.sandboxKeyId, p.sandboxKeyId].map((k) => bucketRow(`read:${k}`)),
    );

    await t.internal.partners.setPartnerLimits({
      partnerId: p.partnerId,
      environment: "production",
      limits: {
        read: { capacity: 5, refillPerSecond: 1 },
        write: { capacity: 6, refillPerSecond: 1 },
        snapshotConcurrency: 2,
        disbursementsPerUserPerDay: 2,
      },
    });
    await t.internal.apiKeys.setApiKeyLimits({
      keyId: p.liveKeyId,
      limits: { read: { capacity: 3, refillPerSecond: 1 } },
    });

    // The shared bucket of the changed key holds no more than its new capacity, at once.
    expect((await bucketRow(`read:${p.liveKeyId}`))?.tokens).toBeLessThanOrEqual(3);
    expect(await policy(p.liveKey)).toBe('"read";q=3;w=3');
    for (const key of [p.sandboxKey, q.sandboxKey, q.liveKey])
      expect(await policy(key)).toBe('"read";q=40;w=40000');
    // The other buckets' rows were not settled by the change (only read again by the reads above).
    const after = await Promise.all(
      [q.liveKeyId, q.sandboxKeyId, p.sandboxKeyId].map((k) => bucketRow(`read:${k}`)),
    );
    for (const [i, row] of after.entries())
      expect(row?.tokens).toBeLessThanOrEqual((before[i]?.tokens ?? 40) + 1);

    const others = await t.internal.partners.getPartnerLimits({ partnerId: q.partnerId });
    for (const env of others.environments) {
      expect(env.overrides?.read).toBeUndefined();
      expect(env.overrides?.snapshotConcurrency).toBeUndefined();
      expect(env.keys).toEqual([]);
      expect(env.effective).toMatchObject({ snapshotConcurrency: 8, disbursementsPerUserPerDay: 10 });
    }
    const own = await t.internal.partners.getPartnerLimits({ partnerId: p.partnerId });
    const sandbox = own.environments.find((e) => e.environment === "sandbox");
    expect(sandbox?.overrides?.read).toBeUndefined();
    expect(sandbox?.effective).toMatchObject({ read: defaults.read, snapshotConcurrency: 8 });
  });
});

describe("bad values", () => {
  const bad: [string, Partial<SetPartnerLimitsRequest["limits"]>, string][] = [
    ["zero capacity", { read: { capacity: 0, refillPerSecond: 1 } as never }, "limits.read.capacity"],
    ["negative capacity", { write: { capacity: -5, refillPerSecond: 1 } as never }, "limits.write.capacity"],
    ["absurd capacity", { read: { capacity: 100_001, refillPerSecond: 1 } as never }, "limits.read.capacity"],
    ["zero refill", { read: { capacity: 10, refillPerSecond: 0 } as never }, "limits.read.refillPerSecond"],
    [
      "negative refill",
      { read: { capacity: 10, refillPerSecond: -1 } as never },
      "limits.read.refillPerSecond",
    ],
    [
      "NaN refill",
      { write: { capacity: 10, refillPerSecond: Number.NaN } as never },
      "limits.write.refillPerSecond",
    ],
    [
      "infinite refill",
      { read: { capacity: 10, refillPerSecond: Infinity } as never },
      "limits.read.refillPerSecond",
    ],
    [
      "too fine a refill",
      { read: { capacity: 10, refillPerSecond: 0.005 } as never },
      "limits.read.refillPerSecond",
    ],
    [
      "absurd refill",
      { read: { capacity: 10, refillPerSecond: 10_000.5 } as never },
      "limits.read.refillPerSecond",
    ],
    ["zero concurrency", { snapshotConcurrency: 0 }, "limits.snapshotConcurrency"],
    ["absurd concurrency", { snapshotConcurrency: 1_001 }, "limits.snapshotConcurrency"],
    ["negative per-day", { disbursementsPerUserPerDay: -1 }, "limits.disbursementsPerUserPerDay"],
    ["absurd per-day", { disbursementsPerUserPerDay: 10_001 }, "limits.disbursementsPerUserPerDay"],
  ];

  it("are refused with validation_failed naming the field, and change nothing", async () => {
    const p = await createPartner(t);
    for (const [what, limits, field] of bad) {
      const r = await refusal(
        t.internal.partners.setPartnerLimits({ partnerId: p.partnerId, environment: "production", limits }),
      );
      expect(r.code, what).toBe("validation_failed");
      expect(r.connect, what).toBe(Code.InvalidArgument);
      expect(Object.keys(r.fields), what).toEqual([field]);
    }
    const resets: [Record<string, unknown>, string][] = [
      [{ reset: ["burst"] }, "reset"],
      [{ limits: { snapshotConcurrency: 3 }, reset: ["snapshot_concurrency"] }, "reset"],
      [{}, "limits"],
      [{ environment: "staging", limits: { snapshotConcurrency: 3 } }, "environment"],
    ];
    for (const [req, field] of resets) {
      const r = await refusal(
        t.internal.partners.setPartnerLimits({
          partnerId: p.partnerId,
          environment: "production",
          ...req,
        } as never),
      );
      expect(r.code).toBe("validation_failed");
      expect(Object.keys(r.fields)).toEqual([field]);
    }
    // A key has only its buckets: the limits on expensive work are its partner's.
    const perKey = await refusal(
      t.internal.apiKeys.setApiKeyLimits({
        keyId: p.liveKeyId,
        limits: { snapshotConcurrency: 3, disbursementsPerUserPerDay: 3 },
        reset: ["disbursements_per_user_per_day"],
      }),
    );
    expect(perKey.code).toBe("validation_failed");
    expect(Object.keys(perKey.fields).sort()).toEqual([
      "limits.disbursementsPerUserPerDay",
      "limits.snapshotConcurrency",
      "reset",
    ]);
    const unchanged = await t.internal.partners.getPartnerLimits({ partnerId: p.partnerId });
    for (const env of unchanged.environments) expect(env.keys).toEqual([]);
    expect(unchanged.environments.every((e) => e.overrides?.read === undefined)).toBe(true);
    expect(await policy(p.liveKey)).toBe('"read";q=40;w=40000');
  });
});

describe("unknown partners and keys", () => {
  it("are not_found, whatever the id looks like", async () => {
    const limits = { read: { capacity: 10, refillPerSecond: 1 } };
    for (const partnerId of [
      "ptn_01J0000000000000000000000",
      "ptn_nope",
      "",
      "key_01J0000000000000000000000",
    ]) {
      const set = await refusal(
        t.internal.partners.setPartnerLimits({ partnerId, environment: "sandbox", limits }),
      );
      expect(set.code).toBe("not_found");
      expect(set.connect).toBe(Code.NotFound);
      expect((await refusal(t.internal.partners.getPartnerLimits({ partnerId }))).code).toBe("not_found");
    }
    const p = await createPartner(t);
    for (const keyId of ["key_01J0000000000000000000000", p.partnerId, "", "key_'; drop table api_keys"]) {
      const r = await refusal(t.internal.apiKeys.setApiKeyLimits({ keyId, limits }));
      expect(r.code).toBe("not_found");
    }
  });
});
