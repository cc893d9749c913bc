import os from "node:os";
import { describe, expect, it } from "vitest";
import {
  ConfigError,
  defaultMaxConnections,
  defaultRateLimits,
  loadConfig,
  openFileLimit,
} from "../../src/config.ts";

const key = "ab".repeat(32);
const token = "t".repeat(32);

describe("configuration", () => {
  it("defaults to the embedded database, where local webhooks are on unless ALLOW_LOCAL_WEBHOOKS says otherwise", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      internalPort: 9090,
      internalHost: "127.0.0.1",
      role: "all",
      allowLocalWebhooks: true,
    });
    expect(loadConfig({ ALLOW_LOCAL_WEBHOOKS: "" }).allowLocalWebhooks).toBe(true);
    expect(loadConfig({ ALLOW_LOCAL_WEBHOOKS: "false" }).allowLocalWebhooks).toBe(false);
    expect(loadConfig({ ALLOW_LOCAL_WEBHOOKS: "true" }).allowLocalWebhooks).toBe(true);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.rateLimits).toEqual(defaultRateLimits);
  });

  it("requires MASTER_KEY and INTERNAL_TOKEN with DATABASE_URL, where local webhooks are off unless set", () => {
    expect(() => loadConfig({ DATABASE_URL: "postgres://x/y" })).toThrow(/MASTER_KEY is required/);
    expect(() => loadConfig({ DATABASE_URL: "postgres://x/y", MASTER_KEY: key })).toThrow(
      /INTERNAL_TOKEN is required/,
    );
    const own = { DATABASE_URL: "postgres://x/y", MASTER_KEY: key, INTERNAL_TOKEN: token };
    const c = loadConfig(own);
    expect(c.masterKey?.length).toBe(32);
    expect(c.allowLocalWebhooks).toBe(false);
    expect(loadConfig({ ...own, ALLOW_LOCAL_WEBHOOKS: "" }).allowLocalWebhooks).toBe(false);
    expect(loadConfig({ ...own, ALLOW_LOCAL_WEBHOOKS: "true" }).allowLocalWebhooks).toBe(true);
  });

  it("sizes the pool for the database's cores: twice this machine's plus one with the embedded PostgreSQL, else 10", () => {
    expect(loadConfig({}).dbPoolSize).toBe(2 * os.availableParallelism() + 1);
    const own = { DATABASE_URL: "postgres://x/y", MASTER_KEY: key, INTERNAL_TOKEN: token };
    expect(loadConfig(own).dbPoolSize).toBe(10);
    expect(loadConfig({ ...own, DB_POOL_SIZE: "4" }).dbPoolSize).toBe(4);
    expect(loadConfig({ DB_POOL_SIZE: "40" }).dbPoolSize).toBe(40);
    expect(() => loadConfig({ DB_POOL_SIZE: "1" })).toThrow(/DB_POOL_SIZE must be an integer from 2/);
  });

  it("reads replicas, the direct URL and the replica limits only beside DATABASE_URL, and nothing changes without them", () => {
    const own = { DATABASE_URL: "postgres://pooler:6432/db", MASTER_KEY: key, INTERNAL_TOKEN: token };
    expect(loadConfig(own)).toMatchObject({
      directUrl: undefined,
      replicaUrls: [],
      replicaMaxLagMs: 1_000,
      replicaReadWaitMs: 50,
    });
    const c = loadConfig({
      ...own,
      DATABASE_DIRECT_URL: "postgresql://primary:5432/db",
      DATABASE_REPLICA_URLS: " postgres://r1/db, ,postgresql://r2:5433/db ",
      REPLICA_MAX_LAG_MS: "250",
      REPLICA_READ_WAIT_MS: "0",
    });
    expect(c).toMatchObject({
      directUrl: "postgresql://primary:5432/db",
      replicaUrls: ["postgres://r1/db", "postgresql://r2:5433/db"],
      replicaMaxLagMs: 250,
      replicaReadWaitMs: 0,
    });
    expect(() => loadConfig({ DATABASE_REPLICA_URLS: "postgres://r1/db" })).toThrow(/need DATABASE_URL/);
    expect(() => loadConfig({ DATABASE_DIRECT_URL: "postgres://p/db" })).toThrow(/need DATABASE_URL/);
    // The password of a URL that is not one is not repeated in the error.
    const bad = () => loadConfig({ ...own, DATABASE_REPLICA_URLS: "mysql://u:secret@r1/db" });
    expect(bad).toThrow(/DATABASE_REPLICA_URLS must be postgresql:\/\/ URLs/);
    expect(bad).not.toThrow(/secret/);
    expect(() => loadConfig({ ...own, REPLICA_MAX_LAG_MS: "-1" })).toThrow(/REPLICA_MAX_LAG_MS/);
  });

  it("names the variable that is wrong", () => {
    expect(() => loadConfig({ PORT: "http" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: "70000" })).toThrow(/PORT must be an integer/);
    expect(() => loadConfig({ ROLE: "both" })).toThrow(/ROLE must be one of/);
    expect(() => loadConfig({ MASTER_KEY: "short" })).toThrow(/MASTER_KEY must be 32 bytes/);
    expect(() => loadConfig({ INTERNAL_TOKEN: "short" })).toThrow(/INTERNAL_TOKEN must be at least 24/);
    expect(() => loadConfig({ RATE_LIMIT_READ: "fast" })).toThrow(/RATE_LIMIT_READ must look like/);
    expect(() => loadConfig({ PUBLIC_URL: "example.com" })).toThrow(/PUBLIC_URL/);
    expect(() => loadConfig({ MASTER_KEYS_ACCEPTED: `${"ab".repeat(32)},short` })).toThrow(
      /MASTER_KEYS_ACCEPTED \(key 2\) must be 32 bytes/,
    );
  });

  it("keeps finished data 30 days (sandbox loans 90), and refuses a retention inside the 14-day webhook window", () => {
    expect(loadConfig({}).retention).toEqual({ days: 30, sandboxDays: 90, batchSize: 500, auditDays: 365 });
    expect(
      loadConfig({
        RETENTION_DAYS: "15",
        SANDBOX_RETENTION_DAYS: "365",
        RETENTION_BATCH_SIZE: "1000",
        PORTAL_AUDIT_RETENTION_DAYS: "90",
      }).retention,
    ).toEqual({ days: 15, sandboxDays: 365, batchSize: 1000, auditDays: 90 });
    expect(() => loadConfig({ PORTAL_AUDIT_RETENTION_DAYS: "7" })).toThrow(/PORTAL_AUDIT_RETENTION_DAYS/);
    for (const days of ["14", "0", "-30"]) {
      expect(() => loadConfig({ RETENTION_DAYS: days })).toThrow(
        /RETENTION_DAYS must be at least 15 days.*retried and replayed for 14 days/,
      );
    }
    expect(() => loadConfig({ RETENTION_DAYS: "30d" })).toThrow(
      /RETENTION_DAYS must be a whole number of days/,
    );
    expect(() => loadConfig({ RETENTION_DAYS: "3651" })).toThrow(/RETENTION_DAYS must be a whole number/);
    expect(() => loadConfig({ SANDBOX_RETENTION_DAYS: "7" })).toThrow(
      /SANDBOX_RETENTION_DAYS must be an integer from 15/,
    );
    expect(() => loadConfig({ RETENTION_BATCH_SIZE: "0" })).toThrow(
      /RETENTION_BATCH_SIZE must be an integer/,
    );
  });

  it("reads the accepted master keys of a rotation, hex or base64, comma-separated", () => {
    const hex = "cd".repeat(32);
    const b64 = Buffer.alloc(32, 7).toString("base64");
    const c = loadConfig({ MASTER_KEYS_ACCEPTED: ` ${hex} , ${b64},` });
    expect(c.acceptedMasterKeys).toEqual([Buffer.from(hex, "hex"), Buffer.alloc(32, 7)]);
    expect(loadConfig({}).acceptedMasterKeys).toEqual([]);
  });

  it("reads rate limits as capacity:refill", () => {
    expect(loadConfig({ RATE_LIMIT_READ: "1000000:500000" }).rateLimits.read).toEqual({
      capacity: 1_000_000,
      refillPerSecond: 500_000,
    });
  });

  it("reads the portal's sign-in limits as capacity:refill, 20, 5 and 10 failures by default", () => {
    const d = loadConfig({}).portalSignin;
    expect([d.address.capacity, d.account.capacity, d.device.capacity]).toEqual([20, 5, 10]);
    expect(1 / d.account.refillPerSecond).toBeCloseTo(300);
    expect(loadConfig({ PORTAL_SIGNIN_ADDRESS_LIMIT: "200:2" }).portalSignin.address).toEqual({
      capacity: 200,
      refillPerSecond: 2,
    });
    expect(() => loadConfig({ PORTAL_SIGNIN_DEVICE_LIMIT: "10" })).toThrow(/PORTAL_SIGNIN_DEVICE_LIMIT/);
  });

  it("reads the limits on expensive work, 8 snapshot reads in flight per key and 10 disbursements per user a day by default", () => {
    expect(loadConfig({}).expensiveLimits).toEqual({
      snapshotConcurrencyPerKey: 8,
      disbursementsPerUserPerDay: 10,
    });
    expect(
      loadConfig({ SNAPSHOT_CONCURRENCY_PER_KEY: "32", DISBURSEMENTS_PER_USER_PER_DAY: "3" }).expensiveLimits,
    ).toEqual({ snapshotConcurrencyPerKey: 32, disbursementsPerUserPerDay: 3 });
    expect(() => loadConfig({ SNAPSHOT_CONCURRENCY_PER_KEY: "0" })).toThrow(/SNAPSHOT_CONCURRENCY_PER_KEY/);
    expect(() => loadConfig({ DISBURSEMENTS_PER_USER_PER_DAY: "ten" })).toThrow(ConfigError);
  });

  it("caps connections at a quarter of the open-file limit (at most 10,000) and 512 per address by default", () => {
    const limits = [
      "Limit                     Soft Limit           Hard Limit           Units     ",
      "Max processes             94546                94546                processes ",
      "Max open files            20000                20000                files     ",
    ].join("\n");
    expect(openFileLimit(limits)).toBe(20_000);
    expect(openFileLimit("Max processes 10 10 processes")).toBeUndefined();
    expect(defaultMaxConnections(20_000)).toBe(5_000);
    expect(defaultMaxConnections(1_024)).toBe(256);
    expect(defaultMaxConnections(1_048_576)).toBe(10_000);
    expect(defaultMaxConnections(undefined)).toBe(2_000);
    expect(loadConfig({}).connections.maxPerAddress).toBe(512);
    expect(loadConfig({ MAX_CONNECTIONS: "50000", MAX_CONNECTIONS_PER_ADDRESS: "0" }).connections).toEqual({
      max: 50_000,
      maxPerAddress: 0,
    });
    expect(() => loadConfig({ MAX_CONNECTIONS: "0" })).toThrow(/MAX_CONNECTIONS must be an integer from 1/);
    expect(() => loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: "-1" })).toThrow(/MAX_CONNECTIONS_PER_ADDRESS/);
  });

  it("takes the payment provider's URL and secret key together, or leaves production without one", () => {
    expect(loadConfig({}).paymentProvider).toBeUndefined();
    expect(() => loadConfig({ PAYMENT_PROVIDER_URL: "https://api.example.com" })).toThrow(
      /PAYMENT_PROVIDER_URL and PAYMENT_PROVIDER_SECRET_KEY/,
    );
    expect(() => loadConfig({ PAYMENT_PROVIDER_SECRET_KEY: "sk_live_x" })).toThrow(/set together/);
    expect(() =>
      loadConfig({ PAYMENT_PROVIDER_URL: "api.example.com", PAYMENT_PROVIDER_SECRET_KEY: "sk_live_x" }),
    ).toThrow(/absolute http/);
    expect(
      loadConfig({
        PAYMENT_PROVIDER_URL: "https://api.example.com/",
        PAYMENT_PROVIDER_SECRET_KEY: "sk_live_x",
      }).paymentProvider,
    ).toEqual({ baseUrl: "https://api.example.com", secretKey: "sk_live_x", timeoutMs: 30_000 });
    // A payout attempt holds its disbursement for PAYOUT_RESUME_AFTER_MS: it must outlast a provider call.
    expect(() =>
      loadConfig({
        PAYMENT_PROVIDER_URL: "https://api.example.com",
        PAYMENT_PROVIDER_SECRET_KEY: "sk_live_x",
        PAYOUT_RESUME_AFTER_MS: "10000",
      }),
    ).toThrow(/PAYOUT_RESUME_AFTER_MS must be longer than PAYMENT_PROVIDER_TIMEOUT_MS/);
  });
});
