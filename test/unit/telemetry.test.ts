import { describe, expect, it } from "vitest";
import { redactStatement, tracingRequested } from "../../src/platform/telemetry.ts";
import { collectorHosts, exportCalls, scrubbed } from "../../src/platform/telemetry-export.ts";

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

  it("blanks escape strings, dollar-quoted strings and numbers whole, and keeps names, placeholders and quoted identifiers", () => {
    // A backslash-escaped quote does not end an escape string: nothing after it leaks as text.
    expect(redactStatement("select E'it\\'s 08012345678' as a, b from t where c = 'x'")).toBe(
      "select '?' as a, b from t where c = '?'",
    );
    expect(redactStatement("do $$ begin perform 'secret'; end $$; select $tag$ it's $$ here $tag$")).toBe(
      "do '?'; select '?'",
    );
    expect(
      redactStatement("select t0.id from events_2027_03 t0 where amount_kobo > 2500000 and r = 1.5e3"),
    ).toBe("select t0.id from events_2027_03 t0 where amount_kobo > ? and r = ?");
    expect(redactStatement('select "Col 1" from "T" where x = $12 limit 100')).toBe(
      'select "Col 1" from "T" where x = $12 limit ?',
    );
  });

  it("exports an error's code and an exception's type, never their text", () => {
    class FakeSpan {
      name = "pg.query";
      status = {
        code: 2,
        message: 'duplicate key value violates unique constraint "users_phone" (+2348000000001)',
      };
      events = [
        {
          name: "exception",
          time: [0, 0],
          attributes: {
            "exception.type": "23505",
            "exception.message": "Key (phone)=(+2348000000001)",
            "exception.stacktrace": "at …",
          },
        },
        { name: "retry", time: [0, 0], attributes: { attempt: 2 } },
      ];
      spanContext() {
        return { traceId: "t", spanId: "s", traceFlags: 1 };
      }
    }
    const span = new FakeSpan();
    const out = scrubbed(span as never) as unknown as FakeSpan;
    expect(out.status).toEqual({ code: 2 });
    expect(out.events).toEqual([
      { name: "exception", time: [0, 0], attributes: { "exception.type": "23505" } },
      { name: "retry", time: [0, 0], attributes: { attempt: 2 } },
    ]);
    expect(JSON.stringify(out)).not.toContain("2348000000001");
    // Everything else is the span's own, read through.
    expect(out.name).toBe("pg.query");
    expect(out.spanContext().spanId).toBe("s");
    expect(span.status.message).toContain("duplicate");
    const clean = { ...new FakeSpan(), status: { code: 1 }, events: [] };
    expect(scrubbed(clean as never)).toBe(clean);
  });
});

describe("the network guard and the exporter", () => {
  it("lets pass only the exporter's own calls: to the collector's host, with tracing suppressed", () => {
    let suppressed = true;
    const exempt = exportCalls(
      collectorHosts({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://otel.internal:4318" }),
      () => suppressed,
    );
    expect(exempt("POST otel.internal")).toBe(true);
    expect(exempt("POST http://otel.internal:4318")).toBe(true);
    // Anywhere else, suppressed or not, the call is the caller's: it is reported.
    expect(exempt("POST hooks.partner.example")).toBe(false);
    expect(exempt("POST https://otel.internal.evil.example")).toBe(false);
    suppressed = false;
    expect(exempt("POST otel.internal")).toBe(false);
    expect(collectorHosts({ OTEL_TRACES_EXPORTER: "otlp" })).toEqual(["localhost"]);
    expect(collectorHosts({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://[::1]:4318/v1/traces" })).toEqual([
      "::1",
    ]);
  });
});
