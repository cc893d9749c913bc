import { spawn } from "node:child_process";
import { createDecipheriv, createPrivateKey, createPublicKey, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { masterKeyId } from "../../src/platform/crypto/secret-box.ts";
import { rest } from "../support/clients.ts";
import {
  PROCESS_TEST_TIMEOUT_MS,
  root,
  runCli,
  type ServiceProcess,
  startServiceProcess,
} from "../support/process.ts";

// The real entry point on its own embedded PostgreSQL: what `npm start` does on a fresh machine.
let dataDir: string;
let service: ServiceProcess | undefined;
const env = () => ({
  DATA_DIR: dataDir,
  DATABASE_URL: "",
  MASTER_KEY: "",
  INTERNAL_TOKEN: "",
  INTERNAL_URL: "",
});

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-svc-"));
  await fs.chmod(dataDir, 0o755);
});
afterAll(async () => {
  if (service && service.child.exitCode === null) {
    service.child.kill("SIGTERM");
    await service.exited;
  }
  await fs.rm(dataDir, { recursive: true, force: true });
});

async function cliJson(...args: string[]) {
  const out = await runCli([...args, "--json"], env());
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout);
}

async function keyDocument(key: string) {
  if (!service?.partnerUrl) throw new Error("not running");
  const res = await rest(service.partnerUrl, "GET", "/partner/v1/keys", { key });
  expect(res.status).toBe(200);
  return res.body.keys as { kid: string; publicKey: string }[];
}

/** Opens the service's database with the credentials the embedded default keeps in DATA_DIR. */
async function database() {
  const { password } = JSON.parse(await fs.readFile(path.join(dataDir, "embedded-postgres.json"), "utf8"));
  const port = service?.logs.find((l) => l.msg === "embedded PostgreSQL is running")?.port;
  const client = new pg.Client({
    host: "127.0.0.1",
    port: Number(port),
    user: "postgres",
    password,
    database: "partner_api",
  });
  await client.connect();
  return client;
}

describe("the service process", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  let sandboxKey: string;
  let kids: string[];

  it("starts on a fresh data directory, generating its development secrets", async () => {
    service = await startServiceProcess(env());
    const messages = service.logs.map((l) => l.msg);
    expect(messages).toContain(
      "generated a development master key; production deployments set it in the environment",
    );
    expect((await fs.stat(path.join(dataDir, "master.key"))).mode & 0o777).toBe(0o600);
    expect(await rest(service.partnerUrl ?? "", "GET", "/readyz")).toMatchObject({ status: 200 });
  });

  it("lets an operator create a partner and issue keys from the command line", async () => {
    const partner = await cliJson("partner", "create", "--name", "Kobo Credit", "--fee-bps", "125");
    expect(partner).toMatchObject({
      name: "Kobo Credit",
      feeRateBps: 125,
      id: expect.stringMatching(/^ptn_/),
    });
    const issued = await cliJson("key", "issue", "--partner", partner.id, "--env", "sandbox");
    expect(issued).toMatchObject({ environment: "sandbox", key: expect.stringMatching(/^sk_sandbox_/) });
    sandboxKey = issued.key;
    kids = (await keyDocument(sandboxKey)).map((k) => k.kid);
    expect(kids).toHaveLength(1);

    const bad = await runCli(["key", "issue", "--partner", partner.id, "--env", "staging"], env());
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--env must be sandbox or production");
    const dup = await runCli(["key", "issue", "--partner", partner.id, "--env", "sandbox", "--json"], env());
    expect(dup.code).toBe(1);
    expect(JSON.parse(dup.stdout)).toMatchObject({ error: { code: "api_key_exists" } });

    // The operator seeds the sandbox fixtures, and restores one partner's sandbox.
    expect(await cliJson("sandbox", "seed")).toMatchObject({ users: expect.any(Number), partnerId: "" });
    expect(await cliJson("sandbox", "seed", "--partner", partner.id)).toMatchObject({
      partnerId: partner.id,
    });

    // The server's field errors name the flag to fix, in text and in --json.
    const fee = await runCli(["partner", "set-fee", "--partner", partner.id, "--fee-bps", "20000"], env());
    expect(fee.code).toBe(1);
    expect(fee.stderr).toContain("(validation_failed)");
    expect(fee.stderr).toContain("--fee-bps: must be an integer from 0 to 10000 basis points");
    const feeJson = await runCli(
      ["partner", "set-fee", "--partner", partner.id, "--fee-bps", "20000", "--json"],
      env(),
    );
    expect(JSON.parse(feeJson.stdout)).toMatchObject({
      error: { code: "validation_failed", fields: { feeRateBps: expect.stringContaining("0 to 10000") } },
    });
  });

  it("prints a subcommand's own usage for --help, and for its usage mistakes", async () => {
    const help = await runCli(["key", "issue", "--help"], env());
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: npm run cli -- key issue");
    expect(help.stdout).toContain("--partner ID --env sandbox|production");
    expect(help.stdout).not.toContain("signing-key rotate");
    const all = await runCli(["--help"], env());
    expect(all.stdout).toContain("signing-key rotate");
    const mistake = await runCli(["partner", "set-terms", "--partner", "ptn_x"], env());
    expect(mistake.code).toBe(2);
    expect(mistake.stderr).toContain("--max-cost-bps");
    expect(mistake.stderr).not.toContain("key revoke");
  });

  it("keeps private keys encrypted at rest", async () => {
    const db = await database();
    try {
      const { rows } = await db.query(
        "select kid, environment, public_key, private_key_enc from signing_keys",
      );
      expect(rows).toHaveLength(2);
      const masterKey = Buffer.from(
        (await fs.readFile(path.join(dataDir, "master.key"), "utf8")).trim(),
        "hex",
      );
      for (const row of rows) {
        const sealed: Buffer = row.private_key_enc;
        // Not a PKCS#8 Ed25519 key, in whole or in part.
        expect(() => createPrivateKey({ key: sealed, format: "der", type: "pkcs8" })).toThrow();
        expect(sealed.includes(Buffer.from("302e020100300506032b6570", "hex"))).toBe(false);
        // It names the master key it is sealed under (version 2 | key id | iv | tag | ciphertext); only that
        // key, with the kid as associated data, opens it, and it matches the published key.
        expect(sealed[0]).toBe(2);
        expect(sealed.subarray(1, 9).equals(masterKeyId(masterKey))).toBe(true);
        const decipher = createDecipheriv("aes-256-gcm", masterKey, sealed.subarray(9, 21));
        decipher.setAAD(Buffer.from(`signing-key:${row.kid}`));
        decipher.setAuthTag(sealed.subarray(21, 37));
        const der = Buffer.concat([decipher.update(sealed.subarray(37)), decipher.final()]);
        const pub = createPublicKey(createPrivateKey({ key: der, format: "der", type: "pkcs8" })).export({
          format: "jwk",
        });
        expect(Buffer.from(pub.x as string, "base64url").equals(row.public_key)).toBe(true);
      }
    } finally {
      await db.end();
    }
  });

  it("stops cleanly on SIGTERM and keeps its data and signing keys across a restart", async () => {
    service?.child.kill("SIGTERM");
    expect(await service?.exited).toBe(0);
    service = await startServiceProcess(env());
    expect(service.logs.map((l) => l.msg)).not.toContain("created signing keys");
    expect((await keyDocument(sandboxKey)).map((k) => k.kid)).toEqual(kids);
    const partners = await cliJson("partner", "list");
    expect(partners.partners.map((p: { name: string }) => p.name)).toEqual(["Kobo Credit"]);
  });

  it("refuses to start with a master key that is not its database's, sealing nothing", async () => {
    service?.child.kill("SIGTERM");
    expect(await service?.exited).toBe(0);
    const wrong = spawn(process.execPath, ["src/main.ts"], {
      cwd: root,
      env: {
        ...process.env,
        ...env(),
        PORT: "0",
        INTERNAL_PORT: "0",
        HOST: "127.0.0.1",
        MASTER_KEY: randomBytes(32).toString("hex"),
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    wrong.stderr?.on("data", (d) => {
      stderr += String(d);
    });
    const code = await new Promise((resolve) => wrong.on("exit", resolve));
    expect(code).toBe(2);
    expect(stderr).toContain("configuration error: MASTER_KEY");
    expect(stderr).toContain("cannot open what this database holds");
    // It stopped its PostgreSQL on the way out, and the right key still opens everything.
    service = await startServiceProcess(env());
    expect(service.logs.map((l) => l.msg)).not.toContain(
      "stopping an orphaned embedded PostgreSQL left by an earlier run",
    );
    expect((await keyDocument(sandboxKey)).map((k) => k.kid)).toEqual(kids);
  });

  it("recovers from a kill -9 that left its PostgreSQL running", async () => {
    service?.child.kill("SIGKILL");
    await service?.exited;
    service = await startServiceProcess(env());
    expect(service.logs.map((l) => l.msg)).toContain(
      "stopping an orphaned embedded PostgreSQL left by an earlier run",
    );
    expect((await keyDocument(sandboxKey)).map((k) => k.kid)).toEqual(kids);
  });
});
