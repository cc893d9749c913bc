import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { eventually } from "../support/wait.ts";

// The partner listener at its cap of connections (3 here, no cap per address, as behind a load balancer):
// what a refused client sees, and which open connection gives way to a new one (never one serving a request).
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

/** A connection with a request in flight: a Connect call whose body has not arrived (it is read before anything). */
async function busyConnection(): Promise<net.Socket> {
  const s = await connect();
  s.write(
    "POST /partner.v1.KeysService/ListKeys HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n",
  );
  return s;
}

/** A connection part-way through its request's headers, as a slow-loris client keeps it. */
async function tricklingConnection(): Promise<net.Socket> {
  const s = await connect();
  s.write("G");
  return s;
}

describe("a listener at its cap of connections", () => {
  it("resets a new connection at once while every open one has a request in flight, and serves it once one ends", async () => {
    const busy = await Promise.all([busyConnection(), busyConnection(), busyConnection()]);
    await eventually(async () => (await sample()).open === 3, { what: "three connections counted" });
    expect(await health()).toBe("ECONNRESET");
    expect((await sample()).refused).toBe(1);
    busy[0]?.destroy();
    await eventually(async () => (await sample()).open === 2, { what: "a connection uncounted" });
    expect(await health()).toBe(200);
    // The requests in flight were never cut.
    expect(busy.slice(1).map((b) => b.destroyed)).toEqual([false, false]);
    for (const s of busy) s.destroy();
    await eventually(async () => (await sample()).open === 0, { what: "every connection uncounted" });
  });

  it("closes an idle connection to admit a new one, the longest idle first: trickling headers, silent, between requests", async () => {
    const trickling = await tricklingConnection();
    const used = await usedConnection();
    const silent = await connect();
    await eventually(async () => (await sample()).open === 3, { what: "three connections counted" });
    const before = (await sample()).evicted;
    const newcomers: net.Socket[] = [];
    for (const [i, old] of [trickling, used, silent].entries()) {
      old.on("error", () => undefined);
      const closed = new Promise((resolve) => old.once("close", resolve));
      // A newcomer that stays, each from an address of its own: the client holding the most gives way, and
      // once every client holds one, the connection idle the longest.
      newcomers.push(
        await new Promise<net.Socket>((resolve) => {
          const s = net.connect({ host: "127.0.0.1", port, localAddress: `127.0.0.${4 + i}` }, () =>
            resolve(s),
          );
        }),
      );
      await closed;
    }
    expect((await sample()).evicted - before).toBe(3);
    expect(newcomers.map((s) => s.destroyed)).toEqual([false, false, false]);
    for (const s of newcomers) s.destroy();
    await eventually(async () => (await sample()).open === 0, { what: "every connection uncounted" });
  });

  it("never cuts an HTTP/2 connection with a stream open; one with none gives way like any idle connection", async () => {
    const from = (localAddress: string) => ({
      createConnection: () => net.connect({ host: "127.0.0.1", port, localAddress }),
    });
    const busy = http2.connect(`http://127.0.0.1:${port}`, from("127.0.0.5"));
    busy.on("error", () => undefined);
    // A Connect call whose body is still to come: its stream stays open.
    const stream = busy.request({
      ":method": "POST",
      ":path": "/partner.v1.KeysService/ListKeys",
      "content-type": "application/json",
    });
    stream.on("error", () => undefined);
    stream.write("{");
    const idleSession = http2.connect(`http://127.0.0.1:${port}`, from("127.0.0.6"));
    idleSession.on("error", () => undefined);
    await new Promise((resolve) => idleSession.once("connect", resolve));
    const filler = await connect();
    await eventually(async () => (await sample()).open === 3, { what: "three connections counted" });
    const idleClosed = new Promise((resolve) => idleSession.once("close", resolve));
    expect(await health()).toBe(200);
    await idleClosed;
    expect(busy.destroyed).toBe(false);
    stream.close();
    busy.destroy();
    filler.destroy();
    await eventually(async () => (await sample()).open === 0, { what: "every connection uncounted" });
  });

  it("keeps serving other clients while 1-byte connections from eleven addresses fill it and come back at once", async () => {
    // A cap of 30 here, per-address caps off: eleven addresses want five connections each, each sends one byte
    // and is re-opened the moment it is closed. A client with a request to make still gets its answer.
    await t.stop();
    t = await startTestApp({ config: { connections: { max: 30, maxPerAddress: 0 } } });
    port = Number(new URL(t.partnerUrl).port);
    let running = true;
    const open = new Set<net.Socket>();
    const hold = async (from: string) => {
      while (running) {
        const s = net.connect({ host: "127.0.0.1", port, localAddress: from });
        open.add(s);
        s.on("error", () => undefined);
        s.on("connect", () => s.write("G"));
        await new Promise((resolve) => s.once("close", resolve));
        open.delete(s);
      }
    };
    const holders = Array.from({ length: 55 }, (_, i) => hold(`127.0.9.${(i % 11) + 1}`));
    await eventually(async () => (await sample()).evicted > 100, { what: "the cap full and churning" });
    const answers: (number | string)[] = [];
    for (let i = 0; i < 20; i++) answers.push(await health());
    running = false;
    for (const s of open) s.destroy();
    await Promise.all(holders);
    expect(answers).toEqual(answers.map(() => 200));
  });
});
