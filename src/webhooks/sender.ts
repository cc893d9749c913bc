import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import type { Environment } from "../platform/tenancy.ts";
import { DestinationError, type DestinationPolicy, portOf, vetHost } from "./destination.ts";

/** Why an attempt got no HTTP answer. */
export type AttemptError =
  | "timeout"
  | "connect_timeout"
  | "connection_error"
  | "tls_error"
  | "destination_not_allowed"
  | "dns_error";

/** The outcome of one POST. */
export interface AttemptResult {
  ok: boolean;
  statusCode: number | undefined;
  error: AttemptError | undefined;
  latencyMs: number;
  /** The first 4 KiB of the response body. */
  responseBody: string | undefined;
  /** The Retry-After header, as sent. */
  retryAfter: string | undefined;
  /** The signature headers the attempt carried (set by the delivery worker, kept with the attempt). */
  sentHeaders?: Record<string, string> | undefined;
}

/** Options for {@link createSender}. */
export interface SenderOptions {
  policy: DestinationPolicy;
  /** Time allowed to open the connection (CONTRACT.md §5: 5 s). */
  connectTimeoutMs: number;
  /** Time allowed for the whole attempt (SPEC.md: 30 s). */
  timeoutMs: number;
  /**
   * Connections per destination host (64 by default). The delivery worker bounds attempts in flight itself; a
   * lower bound here would queue one partner's attempts behind another's on a shared host.
   */
  maxSockets?: number;
}

const KEEP_BODY = 4096;
const MAX_DRAIN = 64 * 1024;
const USER_AGENT = "PartnerUnderwritingAPI-Webhooks/1";

/** POSTs webhook bodies: vetted and pinned destination, bounded time, no redirects, first 4 KiB kept. */
export interface Sender {
  /**
   * `environment` is the subscription's: local destinations (ALLOW_LOCAL_WEBHOOKS) are for sandbox ones only.
   * Without it, the switch alone decides (the checks at create and update have already applied the rule).
   */
  post(
    url: string,
    body: string,
    headers: Record<string, string>,
    environment?: Environment,
  ): Promise<AttemptResult>;
  close(): void;
}

function classify(err: unknown): AttemptError {
  if (err instanceof DestinationError) return err.problem;
  const code = (err as NodeJS.ErrnoException).code ?? "";
  if (code === "ATTEMPT_TIMEOUT") return "timeout";
  if (code === "CONNECT_TIMEOUT") return "connect_timeout";
  if (/^(ERR_TLS|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|ERR_SSL)/.test(code)) return "tls_error";
  return "connection_error";
}

/** An attempt's outcome before its latency is measured. */
type Outcome = Omit<AttemptResult, "latencyMs">;

/** An attempt that got no HTTP answer. */
const failed = (err: unknown): Outcome => ({
  ok: false,
  statusCode: undefined,
  error: classify(err),
  responseBody: undefined,
  retryAfter: undefined,
});

/** Creates a sender with keep-alive connection pools. */
export function createSender({
  policy,
  connectTimeoutMs,
  timeoutMs,
  maxSockets = 64,
}: SenderOptions): Sender {
  const agentOptions = { keepAlive: true, maxSockets, maxFreeSockets: 32, scheduling: "lifo" as const };
  const agents = { "http:": new http.Agent(agentOptions), "https:": new https.Agent(agentOptions) };

  const post = async (
    rawUrl: string,
    body: string,
    headers: Record<string, string>,
    environment?: Environment,
  ): Promise<AttemptResult> => {
    const started = performance.now();
    let outcome: Outcome;
    try {
      const url = new URL(rawUrl);
      const lookup = await pinnedLookup(url, policy, environment, connectTimeoutMs);
      const agent = agents[url.protocol as "http:" | "https:"];
      outcome = await request(url, { agent, lookup, body, headers, connectTimeoutMs, timeoutMs });
    } catch (err) {
      outcome = failed(err);
    }
    return { ...outcome, latencyMs: Math.round(performance.now() - started) };
  };

  return {
    post,
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

/**
 * Resolves and vets the destination's host, then answers a lookup that always gives the address just vetted:
 * the connection goes there, whatever DNS says a moment later. DNS answers within the connect budget, or the
 * attempt ends (`dns_error`): a resolver that never answers does not hold the worker. (A system lookup cannot
 * be cancelled; it is left to finish.)
 */
async function pinnedLookup(
  url: URL,
  policy: DestinationPolicy,
  environment: Environment | undefined,
  connectTimeoutMs: number,
): Promise<LookupFunction> {
  let timer: NodeJS.Timeout | undefined;
  const target = await Promise.race([
    vetHost(url.hostname, policy, portOf(url), environment),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new DestinationError("dns_error", `${url.hostname} does not resolve in time`)),
        connectTimeoutMs,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  return (_host, options, cb) => {
    // Node types the callback for one address; with `all` it takes a list (a library interop cast).
    if ((options as { all?: boolean }).all) (cb as never as (e: null, a: unknown[]) => void)(null, [target]);
    else cb(null, target.address, target.family);
  };
}

/** What one POST needs besides its URL. */
interface RequestOptions {
  agent: http.Agent;
  lookup: LookupFunction;
  body: string;
  headers: Record<string, string>;
  connectTimeoutMs: number;
  timeoutMs: number;
}

/** POSTs once, within the connect and total time-outs; never rejects. */
function request(url: URL, o: RequestOptions): Promise<Outcome> {
  const client = url.protocol === "https:" ? https : http;
  return new Promise<Outcome>((resolve) => {
    let settled = false;
    const finish = (r: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(total);
      resolve(r);
    };
    const req = client.request(url, {
      method: "POST",
      agent: o.agent,
      lookup: o.lookup,
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(o.body),
        "user-agent": USER_AGENT,
        ...o.headers,
      },
    });
    const total = setTimeout(() => {
      req.destroy(Object.assign(new Error("attempt timed out"), { code: "ATTEMPT_TIMEOUT" }));
    }, o.timeoutMs);
    req.on("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(() => {
        req.destroy(Object.assign(new Error("connect timed out"), { code: "CONNECT_TIMEOUT" }));
      }, o.connectTimeoutMs);
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
    req.on("error", (err) => finish(failed(err)));
    req.on("response", (res) => readResponse(res, finish));
    req.end(o.body);
  });
}

/** Keeps the first 4 KiB of the answer and stops reading past 64 KiB; `finish` gets the outcome once. */
function readResponse(res: http.IncomingMessage, finish: (r: Outcome) => void): void {
  const chunks: Buffer[] = [];
  let kept = 0;
  let seen = 0;
  res.on("data", (chunk: Buffer) => {
    seen += chunk.length;
    if (kept < KEEP_BODY) {
      chunks.push(chunk.subarray(0, KEEP_BODY - kept));
      kept += Math.min(chunk.length, KEEP_BODY - kept);
    }
    // A receiver streaming a large body does not hold the worker: stop reading.
    if (seen > MAX_DRAIN) res.destroy();
  });
  const settle = () => {
    const status = res.statusCode ?? 0;
    const retryAfter = res.headers["retry-after"];
    finish({
      ok: status >= 200 && status < 300,
      statusCode: status,
      error: undefined,
      responseBody: Buffer.concat(chunks).toString("utf8"),
      retryAfter: typeof retryAfter === "string" ? retryAfter : undefined,
    });
  };
  res.on("end", settle);
  res.on("close", settle);
  res.on("error", settle);
}
