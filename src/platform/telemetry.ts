import { createRequire } from "node:module";
import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { exemptNetworkCalls } from "./network-guard.ts";

/**
 * Tracing with the OpenTelemetry SDK (docs/operations.md "Traces"), off unless the standard variables ask for an
 * exporter: `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER`
 * other than `none`. Everything else is the SDK's own reading of the standard variables: the protocol
 * (`OTEL_EXPORTER_OTLP_PROTOCOL`, http/protobuf by default), sampling (`OTEL_TRACES_SAMPLER`,
 * `OTEL_TRACES_SAMPLER_ARG`), the service's name (`OTEL_SERVICE_NAME`, `partner-api` unless set), resource
 * attributes, propagators. Off, nothing is loaded beyond the API, whose calls then do nothing.
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter === "none") return false;
  return Boolean(exporter || env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

let started: { shutdown(): Promise<void> } | undefined;

/** Whether this process traces: checked before any work done only for traces, so that off costs nothing. */
export let tracingOn = false;

/**
 * Starts the SDK when {@link tracingRequested}: the `pg` instrumentation (a span per statement), `http` and
 * `undici` for outgoing calls (webhook attempts, the payment provider, SMS), each carrying `traceparent`.
 * Incoming requests get their span from the edge ({@link serverSpan}), the same on every face (HTTP/1.1 and
 * HTTP/2, REST, Connect, gRPC, gRPC-Web). Runs before the service's modules load `pg` (src/main.ts imports it
 * first), and loads `pg`, `http` and `https` itself so that they are the instrumented ones.
 */
export function startTracing(env: NodeJS.ProcessEnv = process.env): void {
  if (started || !tracingRequested(env)) return;
  env.OTEL_SERVICE_NAME ??= "partner-api";
  // Traces only: the metrics are Prometheus's at /metrics, the log lines JSON on stdout. Either may still be
  // asked for with its own standard variable.
  env.OTEL_METRICS_EXPORTER ??= "none";
  env.OTEL_LOGS_EXPORTER ??= "none";
  // W3C Trace Context only: no baggage (a caller's, up to 8 KB, would ride along on every job and outgoing call).
  env.OTEL_PROPAGATORS ??= "tracecontext";
  // Loaded only now (synchronously, before the modules after this one in src/main.ts): off, none of it loads.
  const require = createRequire(import.meta.url);
  const { NodeSDK } = require("@opentelemetry/sdk-node") as typeof import("@opentelemetry/sdk-node");
  const { PgInstrumentation } =
    require("@opentelemetry/instrumentation-pg") as typeof import("@opentelemetry/instrumentation-pg");
  const { HttpInstrumentation } =
    require("@opentelemetry/instrumentation-http") as typeof import("@opentelemetry/instrumentation-http");
  const { UndiciInstrumentation } =
    require("@opentelemetry/instrumentation-undici") as typeof import("@opentelemetry/instrumentation-undici");
  const { isTracingSuppressed } = require("@opentelemetry/core") as typeof import("@opentelemetry/core");
  const { traceExporterFromEnv, collectorHosts, exportCalls } =
    require("./telemetry-export.ts") as typeof import("./telemetry-export.ts");
  // The SDK exports with tracing suppressed in its context, to the collector: those calls are its own, never a
  // transaction's (an export's timer may have been set while a span ended inside one).
  exemptNetworkCalls(exportCalls(collectorHosts(env), () => isTracingSuppressed(context.active())));
  const sdk = new NodeSDK({
    traceExporter: traceExporterFromEnv(env),
    instrumentations: [
      new PgInstrumentation({
        requireParentSpan: true,
        // Only for a span that records: an unsampled call pays no redaction.
        requestHook: (span, info) => {
          if (span.isRecording()) span.setAttributes(statementAttributes(info.query.text));
        },
      }),
      new HttpInstrumentation({
        disableIncomingRequestInstrumentation: true,
        requireParentforOutgoingSpans: true,
        requestHook: (span, req) => {
          const r = req as { protocol?: string; host?: string };
          if (r.host && span.isRecording())
            span.setAttributes(urlAttributes(`${r.protocol ?? "https:"}//${r.host}`));
        },
      }),
      new UndiciInstrumentation({
        requireParentforSpans: true,
        requestHook: (span, req) => {
          if (span.isRecording()) span.setAttributes(urlAttributes(req.origin));
        },
      }),
    ],
  });
  sdk.start();
  // The instrumentations patch a module when it is required: require these once now, so the instances the
  // service's own imports get (the same module objects) are the patched ones.
  for (const name of ["pg", "http", "https"]) require(name);
  started = sdk;
  tracingOn = true;
}

/**
 * A statement's literals, in one pass so that each is taken whole: escape strings (`E'…'`, with backslash
 * escapes), dollar-quoted strings (`$$…$$`, `$tag$…$tag$`), plain strings, quoted identifiers (kept), and numbers
 * not part of a name or a `$n` placeholder.
 */
const LITERALS =
  /(?<!\w)[Ee]'(?:[^'\\]|\\.|'')*'|\$([A-Za-z_]\w*)?\$[\s\S]*?\$\1\$|'(?:[^']|'')*'|"(?:[^"]|"")*"|(?<![\w$.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/**
 * A statement's text for its span, with every literal blanked (strings as `'?'`, numbers as `?`): the ORM writes
 * some values into the text itself, and a trace must hold no personal data or secrets. Bound parameters are
 * never recorded.
 */
export function redactStatement(text: string): string {
  return text.replace(LITERALS, (literal) => {
    if (literal.startsWith('"')) return literal;
    return /^[\d]/.test(literal) ? "?" : "'?'";
  });
}

const statementAttributes = (text: string) => {
  const redacted = redactStatement(text);
  return { "db.statement": redacted, "db.query.text": redacted };
};

/**
 * An outgoing call's URL attributes cut to its origin: a webhook URL's path or query may be the partner's
 * secret (a token in it), and the trace goes to whoever runs the collector.
 */
export const urlAttributes = (origin: string) => ({
  "http.url": origin,
  "url.full": origin,
  "http.target": "/",
  "url.path": "/",
  "url.query": "",
});

/** How long a stop waits for the last spans to be sent: a collector that never answers does not hold it. */
export const STOP_TRACING_MS = 2_000;

/**
 * Flushes and stops the SDK (at the end of a clean stop), so the last spans are sent, for at most
 * {@link STOP_TRACING_MS}: past it they are dropped and the process goes on stopping.
 */
export async function stopTracing(): Promise<void> {
  const sdk = started;
  started = undefined;
  tracingOn = false;
  if (!sdk) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    sdk.shutdown().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, STOP_TRACING_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

const tracer = () => trace.getTracer("partner-api");

/**
 * The span of one incoming request, continuing the caller's trace when it sent `traceparent`; `undefined` when
 * tracing is off. Its context is the one {@link inSpan} runs the request's work in.
 */
export function serverSpan(
  method: string,
  headers: Record<string, string | string[] | undefined>,
  attributes: Attributes,
  trustCaller: boolean,
): { span: Span; ctx: Context } | undefined {
  if (!tracingOn) return undefined;
  // `traceparent` alone: a caller's `tracestate` is never carried into our work.
  const caller = trace.getSpanContext(
    propagation.extract(ROOT_CONTEXT, { traceparent: headers.traceparent }),
  );
  // A partner's trace is linked, never continued: its sampled flag must not decide what this service records
  // (every call forced into the traces), nor its trace id which trace our work joins. An operator's is continued.
  const parent = trustCaller && caller ? trace.setSpanContext(ROOT_CONTEXT, caller) : ROOT_CONTEXT;
  const links = !trustCaller && caller ? [{ context: caller }] : [];
  const span = tracer().startSpan(
    method,
    { kind: SpanKind.SERVER, attributes, links, root: !trustCaller },
    parent,
  );
  return { span, ctx: trace.setSpan(parent, span) };
}

/**
 * `fn`, to be run later (a timer, a loop) outside whatever trace is current where it is scheduled: work for
 * every partner must never run in one partner's trace. With tracing off, `fn` itself.
 */
export function detached<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
  return tracingOn ? context.bind(ROOT_CONTEXT, fn) : fn;
}

/** Runs `fn` in `ctx` (a span's), or as it is when there is none. */
export function inContext<A extends unknown[], R>(
  ctx: Context | undefined,
  fn: (...args: A) => R,
  ...args: A
): R {
  return ctx ? context.with(ctx, fn, undefined, ...args) : fn(...args);
}

/**
 * Runs `fn` in a span of its own (a child of the current one, or of `parent` when given), ended when it
 * settles and marked as an error when it throws. With tracing off, just runs `fn`.
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: () => Promise<T>,
  parent?: Context,
): Promise<T> {
  if (!tracingOn) return fn();
  const within = parent ?? context.active();
  // Under a span whose trace is not sampled, children are not sampled either (the parent-based sampler, the
  // standard one): run `fn` in that span's context and make none.
  const current = trace.getSpan(within)?.spanContext();
  if (current && !(current.traceFlags & TraceFlags.SAMPLED)) return parent ? context.with(parent, fn) : fn();
  const span = tracer().startSpan(name, { attributes }, within);
  try {
    return await context.with(trace.setSpan(within, span), fn);
  } catch (err) {
    // The error's kind, never its text (it may carry values): an ApiError's code, a system error's, or its name.
    const e = err as { code?: unknown; name?: unknown } | undefined;
    span.setAttribute("error.type", String(e?.code ?? e?.name ?? "Error"));
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

/** The W3C trace context of the current span (`traceparent`, and `tracestate` when any), to store with work
 * that another process will do; empty with tracing off or outside any span. */
export function traceCarrier(): { traceparent?: string } {
  if (!tracingOn) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ? { traceparent: carrier.traceparent } : {};
}

/** The context a stored carrier names, to continue its trace in; undefined for none. */
export function contextOf(carrier: { traceparent?: unknown; tracestate?: unknown } | null | undefined) {
  if (!tracingOn || typeof carrier?.traceparent !== "string") return undefined;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The current span's trace and span ids, for log lines; undefined outside a (sampled or not) span. */
export function currentIds(): { trace_id: string; span_id: string } | undefined {
  if (!tracingOn) return undefined;
  const s = trace.getActiveSpan()?.spanContext();
  return s && trace.isSpanContextValid(s) ? { trace_id: s.traceId, span_id: s.spanId } : undefined;
}
