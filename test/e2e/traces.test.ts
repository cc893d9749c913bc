import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlp-receiver.ts";
import { PROCESS_TEST_TIMEOUT_MS, type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// One trace from a partner's call to the webhook it caused: an API process and a worker process, each exporting
// spans over OTLP/HTTP to a collector in this test. The partner creates a disbursement, the person accepts it,
// the worker pays it out and delivers DISBURSEMENT_DELIVERED; every step is a span of the partner call's trace,
// across both processes, and the webhook arrives with that trace's `traceparent`. Without the OTEL variables,
// nothing is traced: no span, no `traceparent`, no trace id in the log.
let t: TestApp;
let p: PartnerFixture;
let receiver: TestReceiver;
let collector: OtlpReceiver;
const processes: ServiceProcess[] = [];
/** The trace id a partner's own `traceparent` names. */
const PARTNER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

beforeAll(async () => {
  // This process's app sets up partners (its internal API); it runs no jobs and is not traced.
  t = await startTestApp({ config: { role: "api" } });
  p = await createPartner(t);
  receiver = await startReceiver();
  collector = await startOtlpReceiver();
});
afterAll(async () => {
  for (const s of processes) if (s.child.exitCode === null) s.child.kill("SIGTERM");
  await Promise.all(processes.map((s) => s.exited));
  await receiver?.close();
  await collector?.close();
  await t?.stop();
});

/** The environment of a service process on this file's database; `traced` adds the OTEL variables. */
function serviceEnv(role: "api" | "worker", traced: boolean): Record<string, string> {
  const untraced = Object.fromEntries(
    Object.keys(process.env)
      .filter((k) => k.startsWith("OTEL_"))
      .map((k) => [k, ""]),
  );
  return {
    ...untraced,
    ROLE: role,
    DATABASE_URL: t.databaseUrl,
    MASTER_KEY: t.masterKey.toString("hex"),
    INTERNAL_TOKEN: t.internalToken,
    ALLOW_LOCAL_WEBHOOKS: "true",
    LOG_LEVEL: "debug",
    ...(traced && {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_TRACES_SAMPLER: "always_on",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    }),
  };
}

async function start(
  role: "api" | "worker",
  traced: boolean,
  extra: Record<string, string> = {},
): Promise<ServiceProcess> {
  const s = await startServiceProcess({ ...serviceEnv(role, traced), ...extra });
  processes.push(s);
  return s;
}

let traced: Promise<{ api: ServiceProcess; worker: ServiceProcess }> | undefined;
/** A traced API process and a traced worker, started once for the tests that need them. */
function tracedProcesses() {
  traced ??= (async () => ({ api: await start("api", true), worker: await start("worker", true) }))();
  return traced;
}

async function stop(s: ServiceProcess): Promise<void> {
  s.child.kill("SIGTERM");
  await s.exited;
}

describe("traces", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("are not made without the OTEL variables: no span exported, no traceparent sent, no trace id logged", async () => {
    const worker = await start("worker", false);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, {
      url: `${receiver.url}/untraced`,
      events: ["*"],
    });
    const sent = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${hook.id}/test`, {
      key: p.sandboxKey,
      body: {},
    });
    expect(sent.status).toBe(200);
    const [delivery] = await receiver.waitFor(1);
    expect(delivery?.headers.traceparent).toBeUndefined();
    await stop(worker);
    expect(worker.logs.filter((l) => "trace_id" in l)).toEqual([]);
    expect(collector.spans).toEqual([]);
    await rest(t.partnerUrl, "DELETE", `/partner/v1/webhooks/${hook.id}`, { key: p.sandboxKey });
  });

  it("follow a partner's disbursement from its call through acceptance and payout to its webhook, across processes", async () => {
    const { api, worker } = await tracedProcesses();
    const partnerUrl = api.partnerUrl as string;
    await createWebhook(partnerUrl, p.sandboxKey, {
      url: `${receiver.url}/traced`,
      events: ["DISBURSEMENT_DELIVERED"],
    });
    const link = await rest(partnerUrl, "POST", "/partner/v1/consent-links", {
      key: p.sandboxKey,
      body: { phoneNumber: "+2348000000002", scopes: ["standing"], ledgerWindowDays: 30 },
    });
    await rest(partnerUrl, "POST", `/partner/v1/sandbox/consent-links/${link.body.id}/accept`, {
      key: p.sandboxKey,
    });
    const created = await rest(partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      // A partner's own trace context, sampled, with state and baggage: linked at most, never continued or carried.
      headers: {
        "idempotency-key": "traced-1",
        traceparent: `00-${PARTNER_TRACE}-00f067aa0ba902b7-01`,
        tracestate: "partner=x",
        baggage: `note=${"b".repeat(2_000)}`,
      },
      body: {
        userId: "usr_sandboxEstablished",
        principalKobo: "1000000",
        destination: "WALLET",
        reference: "traced-1",
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
    expect(created.status).toBe(200);
    await acceptMandate({ ...t, partnerUrl }, p.sandboxKey, created.body.id);
    const delivered = await eventually(
      () => receiver.received.find((r) => r.body.includes('"DISBURSEMENT_DELIVERED"')),
      { timeoutMs: 60_000, what: "the DISBURSEMENT_DELIVERED webhook" },
    );
    // The webhook carries the trace of the partner's call that created the disbursement: ours, not the partner's
    // own, and nothing else of what the partner sent.
    expect(delivered.headers.baggage).toBeUndefined();
    expect(delivered.headers.tracestate).toBeUndefined();
    expect(String(delivered.headers.traceparent)).not.toContain(PARTNER_TRACE);
    const traceparent = String(delivered.headers.traceparent ?? "");
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    const traceId = traceparent.split("-")[1] as string;
    // Both processes export a batch every 100 ms: wait for the attempt's own span.
    await eventually(() => collector.spans.some((s) => s.traceId === traceId && s.name === "POST"), {
      what: "the webhook attempt's span",
    });
    const create = await eventually(
      () => collector.spans.find((s) => s.name === "POST /partner/v1/disbursements" && s.kind === 2),
      { what: "the partner call's span" },
    );
    const byTrace = () =>
      [...new Set(collector.spans.map((s) => s.traceId))].map(
        (id) =>
          `${id}: ${collector.spans
            .filter((s) => s.traceId === id)
            .map((s) => s.name)
            .join(", ")}`,
      );
    expect(create.traceId, byTrace().join("\n")).toBe(traceId);
    expect(create.attributes["partner_api.request_id"]).toBe(created.headers.get("x-request-id"));
    // Its steps, in both processes: the edge's stages and the handler, the acceptance, the payout job, the delivery's wake-up and attempt, the
    // attempt's request, and the statements each ran.
    const inTrace = () => collector.spans.filter((s) => s.traceId === traceId);
    await eventually(
      () => {
        const names = inTrace().map((s) => s.name);
        return (
          names.includes("edge.admit") &&
          names.includes("edge.invoke") &&
          names.includes("handler") &&
          names.includes("disbursement.accept") &&
          names.includes("job disbursements.payout") &&
          names.includes("process webhooks.deliver-sandbox") &&
          names.includes("webhook.attempt") &&
          names.some((n) => n === "POST") &&
          names.some((n) => n.startsWith("pg.query"))
        );
      },
      {
        timeoutMs: 30_000,
        what: `the trace's spans (so far: ${[...new Set(inTrace().map((s) => s.name))].join(", ")})`,
      },
    );
    expect(new Set(inTrace().map((s) => s.pid))).toEqual(new Set([api.child.pid, worker.child.pid]));
    // Every span of the trace hangs from another of it, but the partner call's own.
    const ids = new Set(inTrace().map((s) => s.spanId));
    expect(
      inTrace()
        .filter((s) => !ids.has(s.parentSpanId))
        .map((s) => s.name),
    ).toEqual(["POST /partner/v1/disbursements"]);
    // What a trace holds goes to whoever runs the collector: no webhook URL's path (a partner's token may be in
    // it), no value written into a statement's text.
    const attempt = inTrace().find((s) => s.name === "POST");
    expect(JSON.stringify(attempt?.attributes)).not.toContain("/traced");
    const literals = inTrace().flatMap(
      (s) => String(s.attributes["db.statement"] ?? "").match(/'(?:[^']|'')*'/g) ?? [],
    );
    expect(literals.filter((l) => l !== "'?'")).toEqual([]);
    // The log lines written in that trace say so.
    expect([...api.logs, ...worker.logs].some((l) => l.trace_id === traceId)).toBe(true);

    // A refused call's spans say it failed and with what code, never the error's text (it may carry values).
    const refused = await rest(
      partnerUrl,
      "GET",
      "/partner/v1/users/usr_01JAAAAAAAAAAAAAAAAAAAAAAA/snapshot",
      {
        key: p.sandboxKey,
      },
    );
    expect(refused.status).toBeGreaterThanOrEqual(400);
    const refusedId = refused.headers.get("x-request-id");
    const request = await eventually(
      () => collector.spans.find((s) => s.attributes["partner_api.request_id"] === refusedId),
      { what: "the refused call's span" },
    );
    const handler = await eventually(
      () => collector.spans.find((s) => s.traceId === request.traceId && s.name === "handler"),
      { what: "the refused call's handler span" },
    );
    expect(handler.status).toEqual({ code: 2 });
    expect(handler.attributes["error.type"]).toBe(refused.body.code);
    for (const s of collector.spans) {
      expect(s.status.message, s.name).toBeUndefined();
      for (const e of s.events.filter((e) => e.name === "exception"))
        expect(Object.keys(e.attributes), s.name).toEqual(["exception.type"]);
    }
  });

  it("keeps each partner's webhook attempts in its own call's trace, with two partners' sends interleaved", async () => {
    const { api } = await tracedProcesses();
    const partnerUrl = api.partnerUrl as string;
    const other = await createPartner(t);
    const partners = [p, other];
    const hooks = await Promise.all(
      partners.map((x, i) =>
        createWebhook(partnerUrl, x.sandboxKey, { url: `${receiver.url}/two-${i}`, events: ["*"] }),
      ),
    );
    // Ten test sends, the two partners' alternating, all at once.
    const sends = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const res = await rest(partnerUrl, "POST", `/partner/v1/webhooks/${hooks[i % 2]?.id}/test`, {
          key: partners[i % 2]?.sandboxKey,
          body: {},
        });
        expect(res.status).toBe(200);
        return { deliveryId: res.body.id as string, requestId: res.headers.get("x-request-id") };
      }),
    );
    const got = await eventually(
      () => {
        const mine = sends.map((s) =>
          receiver.received.find((r) => r.headers["x-service-delivery-id"] === s.deliveryId),
        );
        return mine.every(Boolean) && mine;
      },
      { timeoutMs: 30_000, what: "the ten test deliveries" },
    );
    for (const [i, s] of sends.entries()) {
      const call = await eventually(
        () => collector.spans.find((x) => x.attributes["partner_api.request_id"] === s.requestId),
        { what: `the span of send ${i}` },
      );
      // The attempt carries the trace of the call that caused it, and that trace holds one attempt: its own.
      expect(String(got[i]?.headers.traceparent).split("-")[1], `send ${i}`).toBe(call.traceId);
      const attempts = await eventually(
        () => {
          const found = collector.spans.filter(
            (x) => x.traceId === call.traceId && x.name === "webhook.attempt",
          );
          return found.length > 0 && found;
        },
        { what: `the attempt span of send ${i}` },
      );
      expect(attempts.length, `send ${i}`).toBe(1);
    }
    // And the ten calls are ten traces: no call, of either partner, joined another's.
    const callTraces = collector.spans
      .filter((x) => sends.some((s) => s.requestId === x.attributes["partner_api.request_id"]))
      .map((x) => x.traceId);
    expect(new Set(callTraces).size).toBe(10);
  });

  it("export nothing of an unsampled call, whose trace is still named, unsampled, in what it queues, sends and logs", async () => {
    // No trace sampled: nothing is exported, and the call's webhook still carries the call's trace, marked
    // unsampled, as do the log lines written for it.
    const never = { OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" };
    const api = await start("api", true, never);
    const worker = await start("worker", true, never);
    const partnerUrl = api.partnerUrl as string;
    const hook = await createWebhook(partnerUrl, p.sandboxKey, {
      url: `${receiver.url}/unsampled`,
      events: ["*"],
    });
    const sent = await rest(partnerUrl, "POST", `/partner/v1/webhooks/${hook.id}/test`, {
      key: p.sandboxKey,
      body: {},
    });
    expect(sent.status).toBe(200);
    const got = await eventually(
      () => receiver.received.find((r) => r.headers["x-service-delivery-id"] === sent.body.id),
      { timeoutMs: 30_000, what: "the unsampled call's delivery" },
    );
    const traceparent = String(got.headers.traceparent ?? "");
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    const traceId = traceparent.split("-")[1];
    // A clean stop flushes whatever was recorded: nothing was.
    await Promise.all([stop(api), stop(worker)]);
    expect(collector.spans.filter((s) => s.pid === api.child.pid || s.pid === worker.child.pid)).toEqual([]);
    // The call's own access-log line names the trace its webhook carries.
    const line = api.logs.find(
      (l) => l.msg === "request" && l.requestId === sent.headers.get("x-request-id"),
    );
    expect(line?.trace_id).toBe(traceId);
  });
});
