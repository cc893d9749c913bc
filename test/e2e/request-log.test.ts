import { ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { encodeTime } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ListRequestsRequest_Outcome as Outcome,
  RequestLogService,
} from "../../gen/partner/v1/requests_pb.ts";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { listPartitions } from "../../src/platform/db/partitions.ts";
import { REQUEST_LOG, requestLogRepository } from "../../src/requestlog/request-log.repository.ts";
import type { PurgeReport } from "../../src/retention/retention.service.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, grpcUnary, grpcWebClient, rest } from "../support/clients.ts";
import { type MemberFixture, member } from "../support/portal.ts";
import { eventually } from "../support/wait.ts";

// The request log (proto/partner/v1/requests.proto): every call made with a partner's key, on every face, found
// by its request id within seconds, filtered by outcome, code, route and key; one partner's and environment's
// only; never a body but the error's; for portal members only; and never a wait for any call.
const clock = new ManualClock();
let t: TestApp;
let p: PartnerFixture;
let q: PartnerFixture;
let dev: MemberFixture;
let other: MemberFixture;

beforeAll(async () => {
  t = await startTestApp({ clock });
  p = await createPartner(t);
  q = await createPartner(t);
  dev = await member(t, clock, p.partnerId, "viewer");
  other = await member(t, clock, q.partnerId, "admin");
});
afterAll(() => t?.stop());

const log = (m: MemberFixture) => m.browser.client(RequestLogService);
/** The logged call `id`, once its batch is written (a few hundred milliseconds after its answer). */
const logged = (m: MemberFixture, id: string) =>
  eventually(
    () =>
      log(m)
        .getRequest({ id })
        .then((r) => r.request)
        .catch(() => undefined),
    { what: `${id} in the request log` },
  );

describe("the request log", () => {
  it("holds every call made with a key, on every face, by its request id: route template, status, code, time, key, and a failure's error body", async () => {
    const userId = "usr_01JZZZZZZZZZZZZZZZZZZZZZZZ";
    const ok = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
    const missing = await rest(t.partnerUrl, "GET", `/partner/v1/users/${userId}/snapshot`, {
      key: p.sandboxKey,
    });
    expect(ok.status).toBe(200);
    expect(missing.status).toBeGreaterThanOrEqual(400);
    let connectId = "";
    const connectErr = await connectClient(SnapshotService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
      .getSnapshot({ userId })
      .catch((e: unknown) => e as ConnectError);
    connectId = connectErr instanceof ConnectError ? (connectErr.metadata.get("x-request-id") ?? "") : "";
    let webId = "";
    await grpcWebClient(SnapshotService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
      .getSnapshot({ userId })
      .catch((e: unknown) => {
        webId = e instanceof ConnectError ? (e.metadata.get("x-request-id") ?? "") : "";
      });
    const grpc = await grpcUnary(
      t.partnerUrl,
      SnapshotService.method.getSnapshot,
      { userId },
      {
        authorization: `Bearer ${p.sandboxKey}`,
      },
    );
    const grpcId = String(grpc.metadata.get("x-request-id")[0] ?? "");
    expect(grpc.ok).toBe(false);
    // One id per answer, on every face: the one a partner looks up.
    for (const [face, id] of Object.entries({ connectId, webId, grpcId }))
      expect(id, face).toMatch(/^req_[0-9A-Z]{26}$/);

    const first = await logged(dev, ok.headers.get("x-request-id") ?? "");
    expect(first).toMatchObject({
      method: "GET",
      route: "/partner/v1/keys",
      face: "rest",
      status: 200,
      errorCode: "",
      apiKeyId: p.sandboxKeyId,
      apiKeyPrefix: p.sandboxKey.slice(0, 12),
    });
    expect(first.durationMs).toBeGreaterThan(0);
    expect(first.error).toBeUndefined();
    const failed = await logged(dev, missing.headers.get("x-request-id") ?? "");
    expect(failed).toMatchObject({
      route: "/partner/v1/users/{user_id}/snapshot",
      status: missing.status,
      errorCode: (missing.body as { code: string }).code,
    });
    // The error body as the REST face sent it, request id included; the path's user id is in no column.
    expect(failed.error).toEqual(missing.body);
    const { error: _body, createdAt: _at, ...columns } = failed;
    expect(JSON.stringify(columns)).not.toContain(userId);
    for (const [id, face] of [
      [connectId, "connect"],
      [webId, "grpc-web"],
      [grpcId, "grpc"],
    ] as const) {
      const call = await logged(dev, id);
      // The status the REST face would have answered, whatever the face's own framing.
      expect(call).toMatchObject({
        face,
        route: "/partner.v1.SnapshotService/GetSnapshot",
        status: missing.status,
        errorCode: failed.errorCode,
        method: "POST",
      });
    }

    // Filters: failed calls only, by code, by route, by key.
    const failures = await log(dev).listRequests({ outcome: Outcome.FAILED });
    const ids = failures.requests.map((r) => r.id);
    expect(ids).toContain(failed.id);
    expect(ids).not.toContain(first.id);
    expect(failures.requests.every((r) => r.status >= 400)).toBe(true);
    const byCode = await log(dev).listRequests({ errorCode: failed.errorCode });
    expect(byCode.requests.map((r) => r.id).sort()).toEqual([failed.id, connectId, webId, grpcId].sort());
    const byRoute = await log(dev).listRequests({ route: "/partner/v1/keys" });
    expect(byRoute.requests.map((r) => r.id)).toEqual([first.id]);
    expect((await log(dev).listRequests({ apiKeyId: p.liveKeyId })).requests).toEqual([]);
    const succeeded = await log(dev).listRequests({ outcome: Outcome.SUCCEEDED });
    expect(succeeded.requests.map((r) => r.id)).toEqual([first.id]);
    // Newest first, a page at a time.
    const all = await log(dev).listRequests({});
    const paged = await log(dev).listRequests({ limit: 2 });
    expect(paged.hasMore).toBe(true);
    const rest2 = await log(dev).listRequests({ startingAfter: paged.nextStartingAfter });
    expect([...paged.requests, ...rest2.requests].map((r) => r.id)).toEqual(all.requests.map((r) => r.id));
    expect(all.requests.map((r) => r.id)).toEqual([...all.requests.map((r) => r.id)].sort().reverse());
  });

  it("is the partner's and the environment's own: another partner's member, the other environment, and API keys see none of it", async () => {
    const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
    const id = res.headers.get("x-request-id") ?? "";
    await logged(dev, id);
    const notFound = async (call: Promise<unknown>) =>
      errorInfoOf(await call.catch((e: unknown) => e))?.reason;
    expect(await notFound(log(other).getRequest({ id }))).toBe("not_found");
    expect((await log(other).listRequests({})).requests.map((r) => r.id)).not.toContain(id);
    dev.browser.environment = "production";
    try {
      expect(await notFound(log(dev).getRequest({ id }))).toBe("not_found");
    } finally {
      dev.browser.environment = "sandbox";
    }
    // A key, even the partner's own, is refused on every face: a leaked key must not read the partner's calls.
    const byKey = await rest(t.partnerUrl, "GET", `/partner/v1/requests/${id}`, { key: p.sandboxKey });
    expect(byKey.status).toBe(403);
    expect((byKey.body as { code: string }).code).toBe("permission_denied");
    const listed = await connectClient(RequestLogService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
      .listRequests({})
      .catch((e: unknown) => e);
    expect(errorInfoOf(listed)?.reason).toBe("permission_denied");
    // The portal's own calls are not a key's: not logged. A key's call made after them is, and the log is
    // written in the order calls were answered, so by then any of theirs would be too.
    const after = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
    await logged(dev, after.headers.get("x-request-id") ?? "");
    const routes = (await log(dev).listRequests({ limit: 100 })).requests.map((r) => r.route);
    expect(routes.filter((r) => r.includes("RequestLogService") || r.includes("/requests"))).toEqual([]);
  });

  it("never makes a call wait for it: with its table locked, calls are answered, and logged once it is free", async () => {
    const locker = new pg.Client({ connectionString: t.databaseUrl });
    await locker.connect();
    const ids: string[] = [];
    try {
      await locker.query("begin");
      await locker.query("lock table request_log in access exclusive mode");
      // Answered while every write of the log waits on the lock (the lock is let go only after).
      for (let i = 0; i < 20; i++) {
        const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
        expect(res.status).toBe(200);
        ids.push(res.headers.get("x-request-id") ?? "");
      }
    } finally {
      await locker.query("commit");
      await locker.end();
    }
    // Held meanwhile and written after (the log's statement time-out is 5 s; the lock was shorter).
    await logged(dev, ids.at(-1) ?? "");
  });
  it("keeps 30 days: the hourly housekeeping keeps the next days' partitions made and drops each older day whole", async () => {
    const em = t.app.orm.em.fork();
    const now = clock.now();
    const day = (d: Date) => d.toISOString().slice(0, 10).replaceAll("-", "_");
    // Days from 40 days ago, as an instance that ran then would have made them, one holding a call.
    const old = new Date(now.getTime() - 40 * ms.day);
    await requestLogRepository.ensurePartitions(em, old);
    const oldId = `req_${encodeTime(old.getTime(), 10)}${"0".repeat(16)}`;
    await requestLogRepository.insert(em, [
      {
        id: oldId,
        partnerId: p.partnerId,
        environment: "sandbox",
        apiKeyId: p.sandboxKeyId,
        method: "GET",
        route: "/partner/v1/keys",
        face: "rest",
        status: 200,
        errorCode: null,
        durationUs: 100,
        error: null,
      },
    ]);
    const names = async () => (await listPartitions(em, REQUEST_LOG)).map((x) => x.name);
    expect(await names()).toContain(`request_log_${day(old)}`);
    await t.app.boss.unschedule("retention.purge");
    const report = (await t.app.runJob("retention.purge", {})) as PurgeReport;
    expect(report.request_log?.dropped).toContain(`request_log_${day(old)}`);
    const left = await names();
    expect(left).not.toContain(`request_log_${day(old)}`);
    // Today's and the next three days' are there; nothing within the 30 days was dropped.
    for (let i = 0; i <= 3; i++)
      expect(left).toContain(`request_log_${day(new Date(now.getTime() + i * ms.day))}`);
    expect(left.every((n) => n >= `request_log_${day(new Date(now.getTime() - 31 * ms.day))}`)).toBe(true);
  });
});
