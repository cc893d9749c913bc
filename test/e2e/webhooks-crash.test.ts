import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { PROCESS_TEST_TIMEOUT_MS, type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// An API instance in this process, a worker in a child process on the same database: the worker dies
// with kill -9 in the middle of delivering, and a new one must finish the job.
let t: TestApp;
let receiver: TestReceiver;
let worker: ServiceProcess | undefined;

const workerEnv = () => ({
  ROLE: "worker",
  DATABASE_URL: t.databaseUrl,
  MASTER_KEY: t.masterKey.toString("hex"),
  INTERNAL_TOKEN: t.internalToken,
  ALLOW_LOCAL_WEBHOOKS: "true",
  WEBHOOK_CONNECT_TIMEOUT_MS: "500",
  WEBHOOK_TIMEOUT_MS: "1000",
  WEBHOOK_SWEEP_INTERVAL_MS: "200",
});

beforeAll(async () => {
  t = await startTestApp({ config: { role: "api" } });
  receiver = await startReceiver(() => "hang");
});
afterAll(async () => {
  if (worker && worker.child.exitCode === null) {
    worker.child.kill("SIGKILL");
    await worker.exited;
  }
  await receiver?.close();
  await t?.stop();
});

describe("a worker killed mid-delivery", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("loses nothing: a new worker delivers every event, duplicates carrying the same event id", async () => {
    const p = await createPartner(t);
    await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    const events: string[] = [];
    for (let i = 0; i < 5; i++) {
      const raised = await raiseEvent(t.app, {
        partnerId: p.partnerId,
        environment: "sandbox",
        type: "consent.granted",
      });
      events.push(raised.eventId as string);
    }

    worker = await startServiceProcess(workerEnv());
    await receiver.waitFor(1);
    worker.child.kill("SIGKILL");
    expect(await worker.exited).toBe("SIGKILL");

    receiver.answer = () => ({ status: 200 });
    receiver.release();
    worker = await startServiceProcess(workerEnv());
    await eventually(
      async () => {
        const rows = await sql<{ status: string }>(
          t.app.orm.em.fork(),
          "select d.status from webhook_deliveries d where d.event_id = any($1::text[])",
          [events],
        );
        return rows.length === 5 && rows.every((r) => r.status === "DELIVERED");
      },
      { timeoutMs: 30_000, what: "every delivery DELIVERED" },
    );
    const seen = receiver.received.map((r) => {
      const id = r.headers["x-service-event-id"] as string;
      expect(JSON.parse(r.body).id).toBe(id);
      return id;
    });
    expect(new Set(seen)).toEqual(new Set(events));
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
  });
});
