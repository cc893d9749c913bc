import http from "node:http";
import type { AddressInfo } from "node:net";

/** One span as an OTLP/HTTP JSON export carries it, with the process that sent it. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  /** Its status: 0 unset, 1 ok, 2 error, and the message, if one was exported. */
  status: { code: number; message?: string };
  /** Its events (exceptions among them), by name with their attributes. */
  events: { name: string; attributes: Record<string, unknown> }[];
  /** `process.pid` of the resource that exported it. */
  pid: number;
}

/** An OTLP/HTTP collector on loopback (JSON encoding, `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), keeping every span. */
export interface OtlpReceiver {
  /** For `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  spans: ReceivedSpan[];
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
const otlpValue = (v: AnyValue | undefined) =>
  v?.stringValue ??
  (v?.intValue === undefined ? undefined : Number(v.intValue)) ??
  v?.boolValue ??
  v?.doubleValue;
const attributesOf = (list: { key: string; value: AnyValue }[] | undefined) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, otlpValue(a.value)]));

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scopeSpans?: {
      spans?: (Omit<ReceivedSpan, "attributes" | "pid" | "status" | "events"> & {
        attributes?: never[];
        status?: { code?: number; message?: string };
        events?: { name: string; attributes?: never[] }[];
      })[];
    }[];
  }[];
}

/** Starts the collector: `/v1/traces` answers 200 to every export and keeps its spans. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as ExportRequest;
        for (const rs of body.resourceSpans ?? []) {
          const pid = Number(attributesOf(rs.resource?.attributes)["process.pid"]);
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? "",
                name: s.name,
                kind: s.kind,
                attributes: attributesOf(s.attributes),
                status: {
                  code: s.status?.code ?? 0,
                  ...(s.status?.message && { message: s.status.message }),
                },
                events: (s.events ?? []).map((e) => ({
                  name: e.name,
                  attributes: attributesOf(e.attributes),
                })),
                pid,
              });
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
