import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { root, runCli, type ServiceProcess, startServiceProcess } from "../support/process.ts";
import { runQuickstart } from "../support/quickstart.ts";

// The README's five-minute walk-through, as a newcomer runs it: its shell block through bash, against `npm start`
// on a fresh data directory, twice in a row. Both runs print what the README says, and a failing line stops the
// script rather than carrying an empty key on. Then the quickstart, on the same service: a plain `npm start`
// serves both, with no restart and no variable to set.

let dataDir: string;
let service: ServiceProcess;
const client = `keys-client-${randomBytes(4).toString("hex")}.ts`;

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-walk-"));
  await fs.chmod(dataDir, 0o755);
  service = await startServiceProcess({
    DATA_DIR: dataDir,
    DATABASE_URL: "",
    MASTER_KEY: "",
    INTERNAL_TOKEN: "",
    ALLOW_LOCAL_WEBHOOKS: "",
  });
}, 120_000);
afterAll(async () => {
  service?.child.kill("SIGTERM");
  await service?.exited;
  await fs.rm(path.join(root, client), { force: true });
  await fs.rm(dataDir, { recursive: true, force: true });
});

async function walkthrough(): Promise<{ shell: string; ts: string }> {
  const readme = await fs.readFile(path.join(root, "README.md"), "utf8");
  const section = readme.slice(
    readme.indexOf("## Five-minute walk-through"),
    readme.indexOf("## Quickstart"),
  );
  const shell = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  const ts = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (!shell || !ts) throw new Error("README.md's walk-through has no sh or ts block");
  return { shell, ts };
}

describe("the README walk-through", () => {
  it("prints what the README says, run twice in a row on a fresh data directory", async () => {
    const { shell, ts } = await walkthrough();
    const base = service.partnerUrl ?? "";
    await fs.writeFile(path.join(root, client), ts.replaceAll("http://127.0.0.1:8080", base));
    const script = shell.replaceAll("http://127.0.0.1:8080", base).replaceAll("keys-client.ts", client);
    const partners = new Set<string>();
    for (let run = 1; run <= 2; run++) {
      const { stdout } = await promisify(execFile)("bash", ["-c", script], {
        cwd: root,
        env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", INTERNAL_URL: "", INTERNAL_TOKEN: "" },
        timeout: 120_000,
      });
      const partner = /^created partner (ptn_[0-9A-Z]{26})$/m.exec(stdout)?.[1];
      expect(partner, `run ${run}:\n${stdout}`).toBeDefined();
      partners.add(partner ?? "");
      expect(stdout, `run ${run}`).toMatch(/^issued sk_sandbox_…$/m);
      // curl (REST), buf curl (gRPC) and the Connect client each show the sandbox signing key.
      expect(
        stdout.match(/"environment":\s*"sandbox"/g)?.length,
        `run ${run}:\n${stdout}`,
      ).toBeGreaterThanOrEqual(2);
      expect(stdout, `run ${run}`).toMatch(/^\S+ sandbox \S+$/m);
      expect(stdout, `run ${run}`).not.toContain("undefined");
    }
    expect(partners.size).toBe(2);
  }, 240_000);

  it("is followed by the quickstart on the same service, whose sandbox webhooks reach a receiver on loopback", async () => {
    const cli = async (...args: string[]) => {
      const out = await runCli([...args, "--json"], {
        DATA_DIR: dataDir,
        INTERNAL_URL: "",
        INTERNAL_TOKEN: "",
      });
      expect(out.code, out.stderr).toBe(0);
      return JSON.parse(out.stdout) as { id: string; key: string };
    };
    const partner = await cli("partner", "create", "--name", "Quickstart Lending", "--fee-bps", "150");
    const { key } = await cli("key", "issue", "--partner", partner.id, "--env", "sandbox");
    const lines = await runQuickstart(service.partnerUrl ?? "", key);
    expect(lines.map((l) => l.slice(0, 2))).toEqual(["1.", "2.", "3.", "4.", "5.", "6.", "7."]);
    expect(lines[6]).toMatch(/^7\. webhook subscription removed whk_/);
    expect(service.logs.find((l) => l.allowLocalWebhooks !== undefined)).toMatchObject({
      allowLocalWebhooks: true,
      because: "the default on the embedded PostgreSQL",
    });
  }, 120_000);

  it("stops at the first failing line instead of carrying on with an empty key", async () => {
    const { shell } = await walkthrough();
    // The internal API is not where the CLI looks: step 1 fails, and nothing after it runs.
    const failed = await promisify(execFile)("bash", ["-c", shell], {
      cwd: root,
      env: { ...process.env, DATA_DIR: path.join(dataDir, "nothing-here"), DATABASE_URL: "" },
      timeout: 60_000,
    }).then(
      () => undefined,
      (err: { code: number; stdout: string }) => err,
    );
    expect(failed?.code).not.toBe(0);
    expect(failed?.stdout ?? "").not.toContain("created partner");
    expect(failed?.stdout ?? "").not.toContain("issued");
  }, 120_000);
});
