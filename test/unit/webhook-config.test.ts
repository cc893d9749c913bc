import { describe, expect, it } from "vitest";
import { ConfigError, defaultWebhookSendLimit, loadConfig } from "../../src/config.ts";

describe("the webhook delivery configuration", () => {
  it("has limits per environment, partner and destination, a circuit, and a test-send bucket", () => {
    expect(loadConfig({}).webhooks).toMatchObject({
      maxInFlight: 256,
      maxInFlightPerPartner: 64,
      maxInFlightPerDestination: 8,
      circuitFailures: 5,
      circuitMaxWaitMs: 600_000,
      sendRateLimit: defaultWebhookSendLimit,
    });
    expect(
      loadConfig({
        WEBHOOK_MAX_IN_FLIGHT: "100",
        WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER: "10",
        WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION: "2",
        WEBHOOK_CIRCUIT_FAILURES: "3",
        WEBHOOK_SEND_RATE_LIMIT: "5:0.5",
      }).webhooks,
    ).toMatchObject({
      maxInFlight: 100,
      maxInFlightPerPartner: 10,
      maxInFlightPerDestination: 2,
      circuitFailures: 3,
      sendRateLimit: { capacity: 5, refillPerSecond: 0.5 },
    });
  });

  it("refuses limits that contradict each other, naming the variable", () => {
    expect(() =>
      loadConfig({ WEBHOOK_MAX_IN_FLIGHT: "10", WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER: "20" }),
    ).toThrow(/WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER must be at most WEBHOOK_MAX_IN_FLIGHT/);
    expect(() => loadConfig({ WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION: "100" })).toThrow(
      /WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION must be at most WEBHOOK_MAX_IN_FLIGHT_PER_PARTNER/,
    );
    expect(() => loadConfig({ WEBHOOK_MAX_IN_FLIGHT: "0" })).toThrow(ConfigError);
    expect(() => loadConfig({ WEBHOOK_CIRCUIT_MAX_WAIT_MS: "100" })).toThrow(/WEBHOOK_CIRCUIT_MAX_WAIT_MS/);
    expect(() => loadConfig({ WEBHOOK_SEND_RATE_LIMIT: "lots" })).toThrow(
      /WEBHOOK_SEND_RATE_LIMIT must look like/,
    );
  });
});
