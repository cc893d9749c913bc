import { afterAll, expect, it } from "vitest";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { createTestDatabase } from "../support/db.ts";
import { type SilencingProxy, startSilencingProxy } from "../support/tcp-proxy.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp | undefined;
let proxy: SilencingProxy | undefined;
afterAll(async () => {
  await t?.stop();
  await proxy?.close();
});

// A network that drops a connection without a word (a half-open TCP connection: no reset, no answer) never
// reaches PostgreSQL's own time-outs, which see an idle session. The pool must notice by itself.
it("drops pooled connections that stop answering, answers in bounded time, and recovers without a restart", async () => {
  const direct = new URL(await createTestDatabase());
  proxy = await startSilencingProxy({ host: direct.hostname, port: Number(direct.port) });
  const viaProxy = new URL(direct);
  viaProxy.host = `${proxy.host}:${proxy.port}`;
  const lines: string[] = [];
  t = await startTestApp({
    databaseUrl: viaProxy.toString(),
    onLog: (line) => lines.push(line),
    config: {
      role: "api",
      dbPoolSize: 2,
      dbTimeouts: { acquireMs: 1_000, statementMs: 1_000, idleInTransactionMs: 10_000 },
    },
  });
  const p = await createPartner(t);
  const app = t;
  const list = () => rest(app.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey });
  // Both pooled connections in use, then silenced mid-conversation.
  await Promise.all([list(), list()]);
  expect(proxy.silence("partner-api")).toBeGreaterThanOrEqual(1);

  const started = performance.now();
  const during = await Promise.all([list(), list(), list()]);
  const waited = performance.now() - started;
  // Each answers within the statement time-out and its grace (3 s), with 200 once a new connection is open or
  // 503 with Retry-After while none is: never a hang.
  expect(waited).toBeLessThan(8_000);
  for (const res of during) {
    expect([200, 503]).toContain(res.status);
    if (res.status === 503) expect(res.headers.get("retry-after")).toBe("1");
  }
  expect(lines.some((l) => l.includes("dropped a database connection that stopped answering"))).toBe(true);
  // New connections pass the proxy: the service serves normally again, by itself.
  await eventually(async () => (await list()).status === 200, { what: "a 200 after the silence" });
  expect((await fetch(`${app.partnerUrl}/readyz`)).status).toBe(200);
});
