import { describe, expect, it } from "vitest";
import { redactStatement, tracingRequested } from "../../src/platform/telemetry.ts";

// Tracing is off unless the standard variables name an exporter, and what it records holds no value or secret.
describe("tracing", () => {
  it("is asked for by an OTLP endpoint or a traces exporter, and kept off by none", () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" })).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toBe(
      true,
    );
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: "console" })).toBe(true);
    expect(
      tracingRequested({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }),
    ).toBe(false);
  });
  it("blanks every string literal of a statement, quotes inside them included", () => {
    expect(redactStatement("select * from users where phone = '+2348000000001' and name = 'O''Brien'")).toBe(
      "select * from users where phone = '?' and name = '?'",
    );
    expect(redactStatement("select $1::text, count(*) from events")).toBe(
      "select $1::text, count(*) from events",
    );
  });
});
