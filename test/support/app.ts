import { randomBytes } from "node:crypto";
import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import { IngestService } from "../../gen/internal/v1/ingest_pb.ts";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { SigningKeyService } from "../../gen/internal/v1/signing_keys_pb.ts";
import { ConsentAdminService, UserService } from "../../gen/internal/v1/users_pb.ts";
import { type App, createApp } from "../../src/app.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import type { Clock } from "../../src/platform/clock.ts";
import { createLogger, type LogLevel } from "../../src/platform/logger.ts";
import type { Resolver } from "../../src/webhooks/destination.ts";
import { createTestDatabase } from "./db.ts";

/** Options for {@link startTestApp}. */
export interface TestAppOptions {
  /** Share a database with another instance (defaults to a fresh one). */
  databaseUrl?: string;
  clock?: Clock;
  config?: Partial<Config>;
  masterKey?: Buffer;
  /** Master keys that only open (MASTER_KEYS_ACCEPTED). */
  acceptedMasterKeys?: Buffer[];
  internalToken?: string;
  /** DNS answers for webhook destinations. */
  resolver?: Resolver;
  /**
   * Local destinations for production subscriptions too (the test receivers are on loopback), for tests
   * whose point is production delivery; others subscribe with a sandbox key.
   */
  productionLocalWebhooks?: boolean;
  /** Receives every log line at `info` and above, as JSON text (for tests of what operators are told). */
  onLog?: (line: string) => void;
}

/** A running service on loopback ports, with clients for its internal API. */
export interface TestApp {
  app: App;
  partnerUrl: string;
  internalUrl: string;
  databaseUrl: string;
  internalToken: string;
  masterKey: Buffer;
  internal: {
    partners: Client<typeof PartnerService>;
    apiKeys: Client<typeof ApiKeyService>;
    signingKeys: Client<typeof SigningKeyService>;
    users: Client<typeof UserService>;
    consents: Client<typeof ConsentAdminService>;
    ingest: Client<typeof IngestService>;
  };
  stop(): Promise<void>;
}

/** The log level of services under test: silent unless TEST_LOG_LEVEL says otherwise. */
export const testLogLevel = (process.env.TEST_LOG_LEVEL ?? "silent") as LogLevel;

/** A Connect client for an internal service, sending the service token. */
export function internalClient<S extends DescService>(service: S, baseUrl: string, token: string): Client<S> {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  return createClient(service, createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth] }));
}

/** Starts the service against a fresh (or given) test database, on port 0. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const databaseUrl = options.databaseUrl ?? (await createTestDatabase());
  const masterKey = options.masterKey ?? randomBytes(32);
  const internalToken = options.internalToken ?? `itk_${randomBytes(24).toString("base64url")}`;
  const config: Config = {
    ...loadConfig({}),
    port: 0,
    internalPort: 0,
    host: "127.0.0.1",
    databaseUrl,
    dbPoolSize: 5,
    // The tests' receivers listen on loopback (sandbox subscriptions only, unless productionLocalWebhooks).
    allowLocalWebhooks: true,
    ...options.config,
  };
  const onLog = options.onLog;
  const logger = onLog
    ? createLogger({ level: "info", write: onLog })
    : createLogger({ level: testLogLevel, write: (line) => process.stderr.write(`${line}\n`) });
  const app = await createApp({
    config,
    databaseUrl,
    masterKey,
    acceptedMasterKeys: options.acceptedMasterKeys,
    internalToken,
    logger,
    clock: options.clock,
    resolver: options.resolver,
    productionLocalWebhooks: options.productionLocalWebhooks,
  });
  if (!app.partnerUrl || !app.internalUrl) throw new Error("test app started without listeners");
  const internalUrl = app.internalUrl;
  return {
    app,
    partnerUrl: app.partnerUrl,
    internalUrl,
    databaseUrl,
    internalToken,
    masterKey,
    internal: {
      partners: internalClient(PartnerService, internalUrl, internalToken),
      apiKeys: internalClient(ApiKeyService, internalUrl, internalToken),
      signingKeys: internalClient(SigningKeyService, internalUrl, internalToken),
      users: internalClient(UserService, internalUrl, internalToken),
      consents: internalClient(ConsentAdminService, internalUrl, internalToken),
      ingest: internalClient(IngestService, internalUrl, internalToken),
    },
    stop: () => app.stop(),
  };
}

/** Another instance of the service on `first`'s database (its master key, its internal token), as in a scaled-out deployment. */
export function startAnotherInstance(first: TestApp, options: TestAppOptions = {}): Promise<TestApp> {
  return startTestApp({
    ...options,
    databaseUrl: first.databaseUrl,
    masterKey: first.masterKey,
    internalToken: first.internalToken,
  });
}
