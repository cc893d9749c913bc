import pg from "pg";
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

// An instance learns of other instances' key changes over its LISTEN connection. If that connection stops
// delivering without an error (a half-open TCP connection, a stalled backend), the instance must stop
// trusting its caches within seconds, not keep honouring a revoked key for the cache's whole minute.
it("a LISTEN connection gone silent stops the caches within seconds and is replaced", async () => {
  const direct = await createTestDatabase();
  const target = new URL(direct);
  proxy = await startSilencingProxy({ host: target.hostname, port: Number(target.port) });
  const viaProxy = new URL(direct);
  viaProxy.host = `${proxy.host}:${proxy.port}`;
  const lines: string[] = [];
  t = await startTestApp({ databaseUrl: viaProxy.toString(), onLog: (line) => lines.push(line) });
  const app = t;
  const [p, q] = [await createPartner(app), await createPartner(app)];
  const status = async (key: string) => {
    const res = await rest(app.partnerUrl, "GET", "/partner/v1/keys", { key });
    return res.status === 200 ? 200 : `${res.status} ${res.body.code}`;
  };
  // Another instance revokes: the row changes and the change is announced, as the service does it.
  const db = new pg.Client({ connectionString: direct });
  await db.connect();
  const revokeElsewhere = async (keyId: string) => {
    await db.query("begin");
    await db.query("update api_keys set revoked_at = now() where id = $1", [keyId]);
    await db.query("select pg_notify('partner_api_changes', $1)", [`api_key:${keyId}`]);
    await db.query("commit");
  };
  try {
    expect(await status(p.sandboxKey)).toBe(200);
    expect(proxy.silence("partner-api changes")).toBe(1);
    await revokeElsewhere(p.sandboxKeyId);
    const revokedAt = Date.now();
    await eventually(async () => (await status(p.sandboxKey)) === "401 api_key_revoked", {
      timeoutMs: 15_000,
      what: "the revoked key refused",
    });
    // Five seconds without a heartbeat, plus the heartbeat's own period and a loaded machine's slack.
    expect(Date.now() - revokedAt).toBeLessThan(8_000);
    await eventually(() => lines.some((l) => l.includes("change feed reconnected")), { timeoutMs: 15_000 });
    expect(lines.some((l) => l.includes("despite the heartbeats"))).toBe(true);

    // The new connection delivers again: a cached key is dropped as soon as another instance revokes it.
    expect(await status(q.sandboxKey)).toBe(200);
    await revokeElsewhere(q.sandboxKeyId);
    await eventually(async () => (await status(q.sandboxKey)) === "401 api_key_revoked", {
      timeoutMs: 2_000,
      what: "the second revoked key refused over the new connection",
    });
  } finally {
    await db.end();
  }
});
