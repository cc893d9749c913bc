import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { eventually } from "../support/wait.ts";

// The partner listener at its cap of connections (3 here, no cap per address, as behind a load balancer):
// what a refused client sees, and which open connection gives way to a new one.
let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await startTestApp({ config: { connections: { max: 3, maxPerAddress: 0 } } });
  port = Number(new URL(t.partnerUrl).port);
});
afterAll(() => t?.stop());

/** The partner listener's metrics that this file watches. */
async function sample(): Promise<{ open: number; refused: number; evicted: number }> {
  const text = await t.app.services.metrics.render();
  const value = (series: string) => Number(new RegExp(`^${series} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return {
    open: value('http_connections_open\\{listener="partner"\\}'),
    refused: value('http_connections_refused_total\\{listener="partner",reason="listener_limit"\\}'),
    evicted: value('http_connections_evicted_total\\{listener="partner"\\}'),
  };
}

/** A connection from 127.0.0.3, open once connected. */
function connect(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: "127.0.0.1", port, localAddress: "127.0.0.3" }, () => resolve(s));
    s.once("error", reject);
  });
}

/** A keep-alive connection that has had one request answered, and is now idle. */
async function usedConnection(): Promise<net.Socket> {
  const s = await connect();
  s.write("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
  await new Promise<void>((resolve) => s.once("data", () => resolve()));
  return s;
}

/** A GET /healthz on a fresh connection from 127.0.0.2: its status, or the error its connection ended in. */
function health(): Promise<number | string> {
  return new Promise((resolve) => {
    http
      .get({ host: "127.0.0.1", port, path: "/healthz", localAddress: "127.0.0.2", agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      })
      .on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

describe("a listener at its cap of connections", () => {
  it("resets a new connection at once while every open one has sent something, and serves it once one closes", async () => {
    const used = await Promise.all([usedConnection(), usedConnection(), usedConnection()]);
    expect(await health()).toBe("ECONNRESET");
    expect((await sample()).refused).toBe(1);
    used[0]?.destroy();
    await eventually(async () => (await sample()).open === 2, { what: "a connection uncounted" });
    expect(await health()).toBe(200);
    for (const s of used) s.destroy();
    await eventually(async () => (await sample()).open === 0, { what: "every connection uncounted" });
  });

  it("closes the oldest connection that has sent nothing to admit a new one", async () => {
    const silent = [await connect(), await connect()];
    const used = await usedConnection();
    await eventually(async () => (await sample()).open === 3, { what: "three connections counted" });
    const oldestClosed = new Promise((resolve) => silent[0]?.once("close", resolve));
    silent[0]?.on("error", () => undefined);
    expect(await health()).toBe(200);
    await oldestClosed;
    expect(silent[1]?.destroyed).toBe(false);
    expect((await sample()).evicted).toBe(1);
    for (const s of [...silent, used]) s.destroy();
  });
});
