import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { internalClient } from "../support/app.ts";
import { createTestDatabase } from "../support/db.ts";
import type { IdleClientMessage } from "../support/idle-client.ts";
import { root, type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { eventually } from "../support/wait.ts";

// One client address holding more idle connections than the service's process has file descriptors
// (`ulimit -n` is 20000 here). The service runs as a process of its own with the deployment's defaults, so
// its descriptor limit is real (the test's own calls come from this process, which the flood does not touch);
// the idle connections come from three more processes, 7,000 each, which re-open whatever is closed. Another
// address must still be answered as usual.
const CLIENTS = 3;
const PER_CLIENT = 7_000;
const DEFAULT_PER_ADDRESS = 512;

let service: ServiceProcess;
let token: string;
let key: string;
const clients: ChildProcess[] = [];

beforeAll(async () => {
  token = `itk_${randomBytes(24).toString("base64url")}`;
  service = await startServiceProcess({
    ROLE: "api",
    DATABASE_URL: await createTestDatabase(),
    MASTER_KEY: randomBytes(32).toString("hex"),
    INTERNAL_TOKEN: token,
  });
  const internalUrl = service.internalUrl ?? "";
  const { partner } = await internalClient(PartnerService, internalUrl, token).createPartner({
    name: "Idle Connections Lender",
    feeRateBps: 150,
  });
  const issued = await internalClient(ApiKeyService, internalUrl, token).issueApiKey({
    partnerId: partner?.id ?? "",
    environment: "sandbox",
  });
  key = issued.key;
});

afterAll(async () => {
  await Promise.all(clients.map(stop));
  if (service && service.child.exitCode === null) {
    service.child.kill("SIGTERM");
    await service.exited;
  }
});

/** Starts one idle client and resolves once it has attempted all its connections. */
function startIdleClient(port: number, connections: number): Promise<ChildProcess> {
  const script = path.join(root, "test/support/idle-client.ts");
  const child = fork(script, ["127.0.0.1", String(port), String(connections)], {
    execArgv: [],
    stdio: "ignore",
  });
  clients.push(child);
  return new Promise((resolve, reject) => {
    child.on("message", (m: IdleClientMessage) => {
      if ("ready" in m) resolve(child);
    });
    child.once("exit", (code) => reject(new Error(`idle client exited with ${code} before it was ready`)));
  });
}

/** Tells an idle client to close everything and waits until it has exited. */
function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.send("stop");
  });
}

/** A GET on a fresh connection from 127.0.0.2 (loopback answers all of 127/8), not the idle clients' address. */
function getFromOtherAddress(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: hostname, port, path: pathname, headers, localAddress: "127.0.0.2", agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
  });
}

/** One sample of the service's metrics, by series (`name{labels}`). */
async function metrics(): Promise<Map<string, number>> {
  const res = await fetch(`${service.internalUrl}/metrics`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const series = new Map<string, number>();
  for (const line of (await res.text()).split("\n")) {
    const m = /^(\S+) (\S+)$/.exec(line);
    if (m?.[1] && !line.startsWith("#")) series.set(m[1], Number(m[2]));
  }
  return series;
}

describe("idle connections from one address", () => {
  it("past the process's descriptor limit leave another address's calls answered", async () => {
    const partnerUrl = service.partnerUrl ?? "";
    const port = Number(new URL(partnerUrl).port);
    await Promise.all(Array.from({ length: CLIENTS }, () => startIdleClient(port, PER_CLIENT)));

    // Every idle connection has been made once: the calls' connections queue behind them all, and the clients
    // go on re-opening what is closed while the calls are made.
    const health = await getFromOtherAddress(`${partnerUrl}/healthz`);
    expect(health.status).toBe(200);
    const keys = await getFromOtherAddress(`${partnerUrl}/partner/v1/keys`, {
      authorization: `Bearer ${key}`,
    });
    expect(keys.status, keys.body).toBe(200);
    expect(JSON.parse(keys.body)).toHaveProperty("keys");

    // The idle address holds its cap and no more; everything past it was refused, counted, and logged once.
    const refused = 'http_connections_refused_total{listener="partner",reason="address_limit"}';
    const open = 'http_connections_open{listener="partner"}';
    const sample = await eventually(
      async () => {
        const m = await metrics();
        return (m.get(refused) ?? 0) >= CLIENTS * PER_CLIENT - DEFAULT_PER_ADDRESS && m;
      },
      { what: "every idle connection past the cap refused" },
    );
    expect(sample.get(open)).toBeLessThanOrEqual(DEFAULT_PER_ADDRESS);
    expect(sample.has('http_connections_refused_total{listener="partner",reason="listener_limit"}')).toBe(
      false,
    );
    const warned = service.logs.filter((l) => l.msg === "connection cap reached");
    expect(warned.length).toBe(1);
    expect(warned[0]).toMatchObject({ level: "warn", listener: "partner", refused: { address_limit: 1 } });

    // Once the clients stop, the count goes back to nothing.
    await Promise.all(clients.map(stop));
    await eventually(async () => (await metrics()).get(open) === 0, { what: "every connection uncounted" });
  });
});
