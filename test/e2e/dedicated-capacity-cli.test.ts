import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { PROCESS_TEST_TIMEOUT_MS, runCli } from "../support/process.ts";

// The operator's side of dedicated capacity: `npm run cli -- partner set-limits | clear-limits | limits`, as
// an operator types them, against a running service's internal API.

let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const cli = (...args: string[]) =>
  runCli(args, { INTERNAL_URL: t.internalUrl, INTERNAL_TOKEN: t.internalToken, DATA_DIR: "" });
const policy = async (key: string) =>
  (await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key })).headers.get("ratelimit-policy");

describe("partner set-limits, clear-limits and limits", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("set a partner's limits in one environment and one key's own, shown by `partner limits`", async () => {
    const set = await cli(
      "partner",
      "set-limits",
      "--partner",
      p.partnerId,
      "--env",
      "production",
      "--read-capacity",
      "900",
      "--read-refill",
      "150",
      "--snapshot-concurrency",
      "4",
      "--json",
    );
    expect(set.code, set.stderr).toBe(0);
    const body = JSON.parse(set.stdout);
    expect(body.limits).toMatchObject({
      partnerId: p.partnerId,
      environment: "production",
      overrides: { read: { capacity: 900, refillPerSecond: 150 }, snapshotConcurrency: 4 },
      effective: {
        read: { capacity: 900 },
        write: { capacity: 50, refillPerSecond: 25 },
        snapshotConcurrency: 4,
      },
    });
    expect(body.limits.overrides.write).toBeUndefined();
    expect(await policy(p.liveKey)).toBe('"read";q=900;w=6');
    expect(await policy(p.sandboxKey)).toBe('"read";q=500;w=5');

    const key = await cli(
      "partner",
      "set-limits",
      "--key-id",
      p.liveKeyId,
      "--write-capacity",
      "10",
      "--write-refill",
      "2.5",
    );
    expect(key.code, key.stderr).toBe(0);
    expect(key.stdout).toContain(`key ${p.liveKeyId} (production)`);
    expect(key.stdout).toMatch(/write\s+10 tokens, 2\.5\/s\s+\(set here\)/);

    const shown = await cli("partner", "limits", "--partner", p.partnerId);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/read\s+900 tokens, 150\/s\s+\(set here\)/);
    expect(shown.stdout).toMatch(/snapshot reads in flight per key\s+4\s+\(set here\)/);
    expect(shown.stdout).toMatch(/disbursements per user per day\s+10\s+\(default\)/);
    const asJson = JSON.parse((await cli("partner", "limits", "--partner", p.partnerId, "--json")).stdout);
    expect(asJson.environments.map((e: { environment: string }) => e.environment)).toEqual([
      "sandbox",
      "production",
    ]);
    expect(asJson.environments[1].keys[0]).toMatchObject({
      keyId: p.liveKeyId,
      overrides: { write: { capacity: 10 } },
    });
  });

  it("clear-limits goes back to the defaults, all of them or --only some", async () => {
    const only = await cli(
      "partner",
      "clear-limits",
      "--partner",
      p.partnerId,
      "--env",
      "production",
      "--only",
      "read",
      "--json",
    );
    expect(only.code, only.stderr).toBe(0);
    const after = JSON.parse(only.stdout).limits;
    expect(after.overrides.read).toBeUndefined();
    expect(after.overrides.snapshotConcurrency).toBe(4);
    expect(await policy(p.liveKey)).toBe('"read";q=500;w=5');

    expect((await cli("partner", "clear-limits", "--key-id", p.liveKeyId)).code).toBe(0);
    const all = await cli(
      "partner",
      "clear-limits",
      "--partner",
      p.partnerId,
      "--env",
      "production",
      "--json",
    );
    expect(all.code, all.stderr).toBe(0);
    expect(JSON.parse(all.stdout).limits).toMatchObject({ overrides: {}, keys: [] });
  });

  it("refuses bad values naming the flag to fix, with --json's error.fields; unknown partners are not_found", async () => {
    const zero = await cli(
      "partner",
      "set-limits",
      "--partner",
      p.partnerId,
      "--env",
      "sandbox",
      "--read-capacity",
      "0",
      "--read-refill",
      "1",
    );
    expect(zero.code).toBe(1);
    expect(zero.stderr).toContain("(validation_failed)");
    expect(zero.stderr).toContain("--read-capacity: must be an integer from 1 to 100000 tokens");

    const json = await cli(
      "partner",
      "set-limits",
      "--partner",
      p.partnerId,
      "--env",
      "sandbox",
      "--write-capacity",
      "5",
      "--write-refill",
      "0.001",
      "--json",
    );
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout).error).toMatchObject({
      code: "validation_failed",
      fields: { "limits.write.refillPerSecond": expect.stringContaining("0.01 to 10000") },
    });
    expect(json.stderr).toContain("--write-refill: must be from 0.01 to 10000 tokens a second");

    const perKey = await cli(
      "partner",
      "set-limits",
      "--key-id",
      p.sandboxKeyId,
      "--snapshot-concurrency",
      "3",
    );
    expect(perKey.code).toBe(1);
    expect(perKey.stderr).toContain(
      "--snapshot-concurrency: is set per partner and environment, not per key",
    );

    const unknown = await cli(
      "partner",
      "clear-limits",
      "--partner",
      p.partnerId,
      "--env",
      "sandbox",
      "--only",
      "burst",
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('--only: unknown limit "burst"');

    const usage: [string[], string][] = [
      [
        ["--partner", p.partnerId, "--env", "sandbox", "--read-capacity", "10"],
        "--read-refill is required with --read-capacity",
      ],
      [
        ["--partner", p.partnerId, "--env", "sandbox", "--snapshot-concurrency", "1.5"],
        "--snapshot-concurrency must be a whole number",
      ],
      [
        ["--partner", p.partnerId, "--env", "sandbox", "--read-capacity", "10", "--read-refill", "lots"],
        "--read-refill must be",
      ],
      [["--partner", p.partnerId, "--env", "sandbox"], "give a limit to set"],
      [["--partner", p.partnerId, "--read-capacity", "10", "--read-refill", "1"], "--env is required"],
      [
        ["--key-id", p.sandboxKeyId, "--env", "sandbox", "--read-capacity", "10", "--read-refill", "1"],
        "leave out --partner and --env",
      ],
    ];
    for (const [args, message] of usage) {
      const r = await cli("partner", "set-limits", ...args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toContain(message);
    }

    const missing = await cli("partner", "limits", "--partner", "ptn_01J0000000000000000000000", "--json");
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout).error.code).toBe("not_found");
    const help = await cli("partner", "set-limits", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--disbursements-per-user-per-day N");
    expect(help.stdout).not.toContain("key issue");
  });
});
