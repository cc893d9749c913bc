import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scopes } from "../../src/consent/scopes.ts";
import { createWebhook } from "../factories/events.ts";
import { generateEntries, ingestEntries } from "../factories/ledger.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { type Replica, type ReplicatedCluster, startReplicatedCluster } from "../support/replication.ts";
import { eventually } from "../support/wait.ts";

// The service beside a real streaming replica of its own primary (test/support/replication.ts): which reads the
// replica serves (counted by pg_stat_statements on each server), and that no read there ever sees less than
// what was committed before it began — a revoked consent, the partner's own writes — however far behind it is.
let cluster: ReplicatedCluster;
let replica: Replica;
let t: TestApp;
let p: PartnerFixture;
let receiver: TestReceiver;

/** The snapshot read's statement: its calls on a server are the snapshot reads that server served. */
const SNAPSHOT_QUERY = "snapshot_row";

/** `db_reads_total` of `app` by `target:reason`. */
async function reads(app: TestApp): Promise<Record<string, number>> {
  const text = await app.app.services.metrics.render();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^db_reads_total\{target="(\w+)",reason="(\w+)"\} (\d+)/gm))
    out[`${m[1]}:${m[2]}`] = Number(m[3]);
  return out;
}

/** A user with a full-scope consent to `p`, a ledger and standing; returns the user's and the consent's ids. */
async function consentedTrader(app: TestApp): Promise<{ userId: string; consentId: string }> {
  const { userId } = await createUser(app, { segment: "trader" });
  await ingestEntries(app, generateEntries(userId, 40));
  const { consent } = await app.internal.consents.grantConsent({
    userId,
    partnerId: p.partnerId,
    scopes: [...scopes],
    ledgerWindowDays: 90,
    maxLedgerWindowDays: 365,
  });
  return { userId, consentId: consent?.id ?? "" };
}

const snapshot = (app: TestApp, userId: string) =>
  rest(app.partnerUrl, "GET", `/partner/v1/users/${userId}/snapshot`, { key: p.sandboxKey });

beforeAll(async () => {
  cluster = await startReplicatedCluster();
  replica = cluster.replicas[0] as Replica;
  // A replica behind by any amount stays in (REPLICA_MAX_LAG_MS of a minute): reads are kept right by what the
  // replica has replayed, not by its lag. No request log: its batches, written on the primary after every call,
  // are WAL the next read must wait to see replayed, and on a loaded machine 50 ms is not always enough; which
  // server a read runs on is what is counted here, so nothing else writes between them.
  t = await startTestApp({
    databaseUrl: cluster.primaryUrl,
    config: { replicaUrls: [replica.url], replicaMaxLagMs: 60_000, replicaReadWaitMs: 50, requestLog: false },
  });
  p = await createPartner(t);
  receiver = await startReceiver();
}, 120_000);

afterAll(async () => {
  await t?.stop();
  await receiver?.close();
  await cluster?.stop();
}, 60_000);

describe("reads on a streaming replica", () => {
  it("serves snapshots and the partner's lists and gets from the replica, counted on the replica, not the primary", async () => {
    const { userId, consentId } = await consentedTrader(t);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, {
      url: receiver.url,
      events: ["DISBURSEMENT_DELIVERED"],
    });
    await cluster.waitCaughtUp();
    await replica.resetStatements();
    await cluster.resetPrimaryStatements();
    const before = await reads(t);

    for (let i = 0; i < 20; i++) {
      const res = await snapshot(t, userId);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ userId, consentId });
    }
    for (const path of [
      `/partner/v1/consents/${consentId}`,
      "/partner/v1/consents",
      `/partner/v1/users/${userId}/consent`,
      "/partner/v1/consent-links",
      "/partner/v1/disbursements",
      "/partner/v1/webhooks",
      `/partner/v1/webhooks/${hook.id}`,
      `/partner/v1/webhooks/${hook.id}/deliveries`,
      `/partner/v1/webhooks/${hook.id}/stats`,
      "/partner/v1/events",
      "/partner/v1/books",
    ]) {
      const res = await rest(t.partnerUrl, "GET", path, { key: p.sandboxKey });
      expect(res.status, path).toBe(200);
    }

    expect(await replica.statements(SNAPSHOT_QUERY)).toBe(20);
    expect(await cluster.primaryStatements(SNAPSHOT_QUERY)).toBe(0);
    expect(await replica.statements('from "consents"')).toBeGreaterThanOrEqual(3);
    expect(await replica.statements('from "webhooks"')).toBeGreaterThanOrEqual(2);
    expect(await cluster.primaryStatements('from "webhooks"')).toBe(0);
    const after = await reads(t);
    expect((after["replica:fresh"] ?? 0) - (before["replica:fresh"] ?? 0)).toBe(31);
    expect(after["primary:replica_behind"] ?? 0).toBe(before["primary:replica_behind"] ?? 0);
  });

  it("never serves a snapshot of a revoked consent while the replica's replay is paused, nor once it resumes", async () => {
    const { userId, consentId } = await consentedTrader(t);
    await cluster.waitCaughtUp();
    expect((await snapshot(t, userId)).status).toBe(200);

    await replica.pauseReplay();
    try {
      const revoked = await rest(t.partnerUrl, "POST", `/partner/v1/consents/${consentId}/revoke`, {
        key: p.sandboxKey,
        body: {},
      });
      expect(revoked.status).toBe(200);
      const before = await reads(t);
      await replica.resetStatements();
      for (let i = 0; i < 5; i++) {
        const res = await snapshot(t, userId);
        expect(res.status).toBe(403);
        expect(res.body).toMatchObject({ code: "consent_revoked", details: { consentId } });
      }
      // The replica still holds the consent ACTIVE, and was not asked: found behind by the read's own check, or
      // (once a probe has seen its replay paused) left out.
      expect(await replica.statements(SNAPSHOT_QUERY)).toBe(0);
      const after = await reads(t);
      const onPrimary = (c: Record<string, number>) =>
        (c["primary:replica_behind"] ?? 0) + (c["primary:no_healthy_replica"] ?? 0);
      expect(onPrimary(after) - onPrimary(before)).toBe(5);
    } finally {
      await replica.resumeReplay();
    }
    await cluster.waitCaughtUp();
    await replica.resetStatements();
    // Once a probe has seen its replay resume, the replica is asked again, and refuses the read itself.
    await eventually(
      async () => {
        const res = await snapshot(t, userId);
        expect(res.status).toBe(403);
        return (await replica.statements(SNAPSHOT_QUERY)) > 0;
      },
      { what: "a read on the replica once its replay resumed" },
    );
  });

  it("shows the partner its own writes at once, while the replica is paused", async () => {
    await replica.pauseReplay();
    try {
      const hook = await createWebhook(t.partnerUrl, p.sandboxKey, {
        url: `${receiver.url}/mine`,
        events: ["DISBURSEMENT_DELIVERED"],
      });
      const read = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}`, { key: p.sandboxKey });
      expect(read.status).toBe(200);
      expect(read.body).toMatchObject({ id: hook.id, url: `${receiver.url}/mine` });
      const listed = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey });
      expect(listed.body.map((w: { id: string }) => w.id)).toContain(hook.id);

      const { phoneNumber } = await createUser(t);
      const link = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
        key: p.sandboxKey,
        body: { phoneNumber, scopes: ["standing"], ledgerWindowDays: 30 },
      });
      expect(link.status).toBe(200);
      const linkRead = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${link.body.id}`, {
        key: p.sandboxKey,
      });
      expect(linkRead.status).toBe(200);
      expect(linkRead.body).toMatchObject({ id: link.body.id, status: "PENDING" });

      const borrower = await consentedTrader(t);
      const reference = `ryw-${Date.now()}`;
      const created = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
        key: p.sandboxKey,
        headers: { "idempotency-key": reference },
        body: {
          userId: borrower.userId,
          principalKobo: "1000000",
          destination: "WALLET",
          reference,
          repaymentSchedule: {
            installments: [
              {
                dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10),
                amountKobo: "1100000",
              },
            ],
          },
        },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const got = await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${created.body.id}`, {
        key: p.sandboxKey,
      });
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ id: created.body.id, reference });
      const page = await rest(t.partnerUrl, "GET", "/partner/v1/disbursements?limit=5", {
        key: p.sandboxKey,
      });
      expect(page.body.disbursements.map((d: { id: string }) => d.id)).toContain(created.body.id);
    } finally {
      await replica.resumeReplay();
    }
  });

  it("never serves a revoked consent from a replica that lags, and serves it from the replica once it has replayed the revocation", async () => {
    const { userId, consentId } = await consentedTrader(t);
    await cluster.waitCaughtUp();
    // Every commit applied two seconds late: a replica that lags without being paused.
    await replica.setApplyDelay(2_000);
    // An instance that lets a read wait up to 10 s for the replica to replay what it must see.
    const patient = await startAnotherInstance(t, {
      config: { replicaUrls: [replica.url], replicaMaxLagMs: 60_000, replicaReadWaitMs: 10_000 },
    });
    try {
      const revoked = await rest(t.partnerUrl, "POST", `/partner/v1/consents/${consentId}/revoke`, {
        key: p.sandboxKey,
        body: {},
      });
      expect(revoked.status).toBe(200);
      await replica.resetStatements();
      // Waits 50 ms for the replica, then asks the primary.
      expect((await snapshot(t, userId)).body).toMatchObject({ code: "consent_revoked" });
      expect(await replica.statements(SNAPSHOT_QUERY)).toBe(0);
      // Waits for the replica to apply the revocation, then reads there.
      const started = Date.now();
      const res = await snapshot(patient, userId);
      expect(res.body).toMatchObject({ code: "consent_revoked" });
      expect(await replica.statements(SNAPSHOT_QUERY)).toBe(1);
      expect((await reads(patient))["replica:fresh"]).toBe(1);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await patient.stop();
      await replica.setApplyDelay(0);
    }
  });
});

describe("a replica that falls behind or goes away", () => {
  let strict: TestApp;
  const healthy = async (app: TestApp) =>
    /^db_replica_healthy\{replica="[^"]+"\} 1$/m.test(await app.app.services.metrics.render());

  beforeAll(async () => {
    // REPLICA_MAX_LAG_MS as deployed: a second behind, and the replica is left out.
    strict = await startAnotherInstance(t, {
      config: { replicaUrls: [replica.url], replicaMaxLagMs: 1_000 },
    });
  }, 60_000);
  afterAll(() => strict?.stop());

  it("is left out while paused behind the primary, and reads are answered from the primary without an error", async () => {
    const { userId } = await consentedTrader(strict);
    await cluster.waitCaughtUp();
    await eventually(() => healthy(strict), { what: "the replica in use" });
    await replica.pauseReplay();
    try {
      // The primary moves on (a write a tenth of a second) while the replica stands still.
      await eventually(
        async () => {
          await createUser(strict);
          return !(await healthy(strict));
        },
        { timeoutMs: 15_000, what: "the paused replica left out" },
      );
      const before = await reads(strict);
      for (let i = 0; i < 5; i++) expect((await snapshot(strict, userId)).status).toBe(200);
      const after = await reads(strict);
      expect((after["primary:no_healthy_replica"] ?? 0) - (before["primary:no_healthy_replica"] ?? 0)).toBe(
        5,
      );
      // Left out for its paused replay at once, it shows a lag from the probe after the primary moved on.
      await eventually(
        async () => {
          const lag = /^db_replica_lag_seconds\{replica="[^"]+"\} ([\d.]+)$/m.exec(
            await strict.app.services.metrics.render(),
          );
          return Number(lag?.[1]) > 0;
        },
        { timeoutMs: 15_000, what: "the paused replica's lag shown" },
      );
    } finally {
      await replica.resumeReplay();
    }
    await eventually(() => healthy(strict), {
      timeoutMs: 15_000,
      what: "the replica back in once caught up",
    });
    await replica.resetStatements();
    expect((await snapshot(strict, userId)).status).toBe(200);
    expect(await replica.statements(SNAPSHOT_QUERY)).toBe(1);
  });

  it("is left out while stopped, reads answered meanwhile, and taken back once it is up again", async () => {
    const { userId } = await consentedTrader(strict);
    await cluster.waitCaughtUp();
    await eventually(() => healthy(strict), { what: "the replica in use" });
    await replica.stop();
    try {
      // At once, before any probe has noticed: a read the replica fails is answered by the primary.
      for (let i = 0; i < 5; i++) expect((await snapshot(strict, userId)).status).toBe(200);
      expect(await healthy(strict)).toBe(false);
      const counts = await reads(strict);
      expect(
        (counts["primary:replica_failed"] ?? 0) + (counts["primary:no_healthy_replica"] ?? 0),
      ).toBeGreaterThan(0);
    } finally {
      await replica.start();
    }
    await cluster.waitCaughtUp();
    await eventually(() => healthy(strict), {
      timeoutMs: 15_000,
      what: "the replica back in once it answers",
    });
    await replica.resetStatements();
    expect((await snapshot(strict, userId)).status).toBe(200);
    expect(await replica.statements(SNAPSHOT_QUERY)).toBe(1);
  });
});
