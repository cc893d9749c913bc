import { createRequire } from "node:module";
import type { ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";

/**
 * Where spans go, chosen by the standard variables as the SDK itself would (`OTEL_TRACES_EXPORTER`: `otlp`, the
 * default, or `console`; `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`,
 * the default, `http/json` or `grpc`), wrapped so that no error text leaves the process. Made here rather than
 * by the SDK only because the SDK offers no other place to put the wrapper. The first exporter named is used.
 */
export function traceExporterFromEnv(env: NodeJS.ProcessEnv): SpanExporter {
  const require = createRequire(import.meta.url);
  const name = (env.OTEL_TRACES_EXPORTER ?? "otlp")
    .split(",")
    .map((s) => s.trim())
    .find((s) => s === "otlp" || s === "console");
  if (name === "console") {
    const { ConsoleSpanExporter } =
      require("@opentelemetry/sdk-trace") as typeof import("@opentelemetry/sdk-trace");
    return new ScrubbedExporter(new ConsoleSpanExporter());
  }
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  const inner =
    protocol === "grpc"
      ? new (
          require("@opentelemetry/exporter-trace-otlp-grpc") as typeof import("@opentelemetry/exporter-trace-otlp-grpc")
        ).OTLPTraceExporter()
      : protocol === "http/json"
        ? new (
            require("@opentelemetry/exporter-trace-otlp-http") as typeof import("@opentelemetry/exporter-trace-otlp-http")
          ).OTLPTraceExporter()
        : new (
            require("@opentelemetry/exporter-trace-otlp-proto") as typeof import("@opentelemetry/exporter-trace-otlp-proto")
          ).OTLPTraceExporter();
  return new ScrubbedExporter(inner);
}

/**
 * The hosts the spans are sent to (the collector's): only calls there, made by the exporter, are exempt from the
 * network-while-holding guard.
 */
export function collectorHosts(env: NodeJS.ProcessEnv): string[] {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  try {
    return [endpoint ? unbracketed(new URL(endpoint).hostname) : "localhost"];
  } catch {
    return [];
  }
}

/**
 * Which calls the network guard is to let pass: the exporter's, to a collector's host, with tracing suppressed
 * (as the SDK marks its exports). A call elsewhere is the caller's, suppressed or not.
 */
export function exportCalls(hosts: string[], suppressed: () => boolean): (target: string) => boolean {
  const bare = hosts.map(unbracketed);
  return (target) => suppressed() && bare.includes(hostOf(target));
}

const unbracketed = (host: string) => host.replace(/^\[|\]$/g, "");

/** The host of a network guard target (`METHOD host`, `METHOD http://host:port`, or a host). */
const hostOf = (target: string): string => {
  const last = target.slice(target.lastIndexOf(" ") + 1);
  try {
    return unbracketed(last.includes("://") ? new URL(last).hostname : last.replace(/:\d+$/, ""));
  } catch {
    return last;
  }
};

/**
 * Spans as exported: an error's status keeps its code and loses its message, and an exception event keeps only
 * its type. Error messages carry values (a constraint's key, an address, an upstream's answer); the libraries
 * that record them (the `pg`, `http` and `undici` instrumentations, pg-boss) do so with the whole text.
 */
export class ScrubbedExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  constructor(inner: SpanExporter) {
    this.#inner = inner;
  }
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.#inner.export(spans.map(scrubbed), done);
  }
  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}

const EXCEPTION_TYPE = "exception.type";

/** `span` with its status message and exceptions' text left out (the span's other fields are read through). */
export function scrubbed(span: ReadableSpan): ReadableSpan {
  const dirty =
    span.status.message !== undefined ||
    span.events.some((e) => e.name === "exception" && Object.keys(e.attributes ?? {}).length > 1);
  if (!dirty) return span;
  return Object.create(span, {
    status: { value: { code: span.status.code }, enumerable: true },
    events: {
      value: span.events.map((e) =>
        e.name === "exception"
          ? { ...e, attributes: { [EXCEPTION_TYPE]: e.attributes?.[EXCEPTION_TYPE] ?? "Error" } }
          : e,
      ),
      enumerable: true,
    },
  }) as ReadableSpan;
}
