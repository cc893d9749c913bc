import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STOP_TRACING_MS } from "../../src/platform/telemetry.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { PROCESS_TEST_TIMEOUT_MS, type ServiceProcess, startServiceProcess } from "../support/process.ts";

// The trace collector is the operator's, across a network: it may take connections and never answer. The
// service's calls must not wait on it, not one of hundreds at once, and a clean stop must not hang on the last
// export.
let t: TestApp;
let p: PartnerFixture;
let service: ServiceProcess | undefined;
const held = new Set<net.Socket>();
const silent = net.createServer((socket) => {
  // Takes the connection and whatever is sent, and never says a word.
  held.add(socket);
  socket.on("data", () => undefined);
  socket.on("error", () => undefined);
  socket.on("close", () => held.delete(socket));
});

beforeAll(async () => {
  t = await startTestApp({ config: { role: "api" } });
  p = await createPartner(t);
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  if (service && service.child.exitCode === null) service.child.kill("SIGKILL");
  for (const s of held) s.destroy();
  await new Promise((resolve) => silent.close(resolve));
  await t?.stop();
});

describe("a trace collector that never answers", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("holds no partner call, not even 300 at once, and does not hold a clean stop", async () => {
    const { port } = silent.address() as net.AddressInfo;
    service = await startServiceProcess({
      ROLE: "api",
      DATABASE_URL: t.databaseUrl,
      MASTER_KEY: t.masterKey.toString("hex"),
      INTERNAL_TOKEN: t.internalToken,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_TRACES_SAMPLER: "always_on",
      // Export at once and often, so the exports are stuck on the collector while the calls are made.
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "16",
      // The exporter would wait ten minutes for an answer: only the service's own bound can end a stop in time.
      OTEL_EXPORTER_OTLP_TIMEOUT: "600000",
      OTEL_BSP_EXPORT_TIMEOUT: "600000",
    });
    const url = service.partnerUrl as string;
    expect((await rest(url, "GET", "/partner/v1/keys", { key: p.sandboxKey })).status).toBe(200);
    const answers = await Promise.all(
      Array.from({ length: 300 }, () => rest(url, "GET", "/partner/v1/keys", { key: p.sandboxKey })),
    );
    // Every call answered as it would be untraced (a 429 is the partner's rate limit, never a wait).
    expect(answers.filter((a) => a.status !== 200 && a.status !== 429)).toEqual([]);
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
    // The exporter did try, and is stuck on the collector.
    expect(held.size).toBeGreaterThan(0);

    // A clean stop drops the spans it cannot send after STOP_TRACING_MS rather than waiting on the collector:
    // it ends by itself, with code 0, long before the exporter's ten minutes (and this test's deadline).
    const stopping = Date.now();
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
    expect(service.logs.some((l) => l.msg === "stopped")).toBe(true);
    console.log(JSON.stringify({ stopMs: Date.now() - stopping, stopTracingMs: STOP_TRACING_MS }));
  });
});
