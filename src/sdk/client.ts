import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromJson,
  getOption,
  type JsonObject,
  type JsonValue,
  toJson,
} from "@bufbuild/protobuf";
import type { Client, Interceptor, Transport } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { http } from "../../gen/google/api/annotations_pb.ts";
import { HttpBodySchema } from "../../gen/google/api/httpbody_pb.ts";
import { ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { SandboxService } from "../../gen/partner/v1/sandbox_pb.ts";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";

/**
 * The REST client of the partner API: one method per operation, typed by the generated messages, for Node
 * and browsers (anything with `fetch`).
 *
 * ```ts
 * const api = createPartnerClient({ baseUrl: "https://api.example.com", apiKey: process.env.API_KEY });
 * const link = await api.consents.createConsentLink({ phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: 90 });
 * ```
 *
 * Every POST carries an `Idempotency-Key` (yours, or a fresh UUID), and a request that meets a 429, a 5xx,
 * a `409 idempotency_key_in_use` or a network error is sent again after the server's `Retry-After` (or an
 * exponential back-off with jitter), with the same key, so a retried write happens once. A `Retry-After`
 * longer than `maxRetryDelayMs` (a daily limit) is not waited for: the error is thrown at once.
 */

/** The services of the partner API. */
export const partnerServices = {
  keys: KeysService,
  consents: ConsentService,
  snapshots: SnapshotService,
  webhooks: WebhookService,
  disbursements: DisbursementService,
  sandbox: SandboxService,
} as const;

type Services = typeof partnerServices;

/** A failed call: the API's error body (`{ code, message, requestId, details? }`) with the HTTP status. */
export class PartnerApiError extends Error {
  override readonly name = "PartnerApiError";
  /** HTTP status, or 0 when no response arrived. */
  readonly status: number;
  /** The API's snake_case code, such as `consent_required`; `network_error` when no response arrived. */
  readonly code: string;
  readonly requestId: string;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds the server asked to wait (`Retry-After`), if it did. */
  readonly retryAfterSeconds: number | undefined;
  constructor(o: {
    status: number;
    code: string;
    message: string;
    requestId?: string;
    details?: Record<string, unknown>;
    retryAfterSeconds?: number;
  }) {
    super(o.message);
    this.status = o.status;
    this.code = o.code;
    this.requestId = o.requestId ?? "";
    this.details = o.details;
    this.retryAfterSeconds = o.retryAfterSeconds;
  }
}

/** Options for {@link createPartnerClient}. */
export interface PartnerClientOptions {
  /** Base URL of the API, such as `https://api.example.com`. */
  baseUrl: string;
  /** The API key (`sk_sandbox_…` or `sk_live_…`). Keep it on your servers. */
  apiKey: string;
  /** Retries after the first attempt (default 3). */
  maxRetries?: number;
  /** First back-off delay when the server gives no `Retry-After` (default 250 ms), doubled each time. */
  retryBaseMs?: number;
  /** Longest wait between attempts (default 30 s); a `Retry-After` longer than this is not retried. */
  maxRetryDelayMs?: number;
  /** A `fetch` of your own (default: the global one). */
  fetch?: typeof globalThis.fetch;
  /** How to wait (tests pass a fake). */
  sleep?: (ms: number) => Promise<void>;
}

/** Per-call options. */
export interface RestCallOptions {
  /** The idempotency key of a POST; a fresh UUID when unset. Reuse it to retry the same write yourself. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** A service's REST methods, typed like the generated Connect client. */
export type RestClient<S extends DescService> = {
  [K in keyof Client<S>]: Client<S>[K] extends (request: infer I, ...rest: never[]) => infer O
    ? (request: I, options?: RestCallOptions) => O
    : never;
};

/** The REST client: one property per service. */
export type PartnerClient = { [K in keyof Services]: RestClient<Services[K]> };

const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);

/** Creates the REST client. */
export function createPartnerClient(options: PartnerClientOptions): PartnerClient {
  const client = {} as Record<string, Record<string, unknown>>;
  for (const [name, service] of Object.entries(partnerServices)) {
    const methods: Record<string, unknown> = {};
    for (const method of service.methods) {
      methods[method.localName] = (request: Record<string, unknown>, call?: RestCallOptions) =>
        callRest(options, method, request ?? {}, call ?? {});
    }
    client[name] = methods;
  }
  return client as unknown as PartnerClient;
}

/** The generated Connect clients over Connect (fetch-based: Node and browsers), with the API key sent. */
export function createPartnerConnectClients(o: { baseUrl: string; apiKey: string; transport?: Transport }): {
  [K in keyof Services]: Client<Services[K]>;
} {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${o.apiKey}`);
    return next(req);
  };
  const transport = o.transport ?? createConnectTransport({ baseUrl: o.baseUrl, interceptors: [auth] });
  const clients = {} as Record<string, unknown>;
  for (const [name, service] of Object.entries(partnerServices))
    clients[name] = createClient(service, transport);
  return clients as { [K in keyof Services]: Client<Services[K]> };
}

/** The `google.api.http` rule of a method, as verb, path template, body and response body. */
function ruleOf(method: DescMethod) {
  const rule = getOption(method, http);
  const p = rule.pattern;
  if (p.case === undefined || p.case === "custom") throw new Error(`${method.name} has no REST mapping`);
  return { verb: p.case.toUpperCase(), template: p.value, body: rule.body, responseBody: rule.responseBody };
}

const jsonNameOf = (message: DescMessage, protoName: string) =>
  message.fields.find((f) => f.name === protoName)?.jsonName ?? protoName;

async function callRest(
  o: PartnerClientOptions,
  method: DescMethod,
  request: Record<string, unknown>,
  call: RestCallOptions,
): Promise<unknown> {
  const rule = ruleOf(method);
  const input = method.input;
  const fields = toJson(input, create(input, request as never), { alwaysEmitImplicit: false }) as JsonObject;
  // Path parameters come out of the message; what is left is the body (`*` or one field) or the query.
  const path = rule.template.replace(/\{([a-z0-9_.]+)(=[^}]*)?\}/g, (_, name: string) => {
    const key = jsonNameOf(input, name);
    const value = fields[key];
    delete fields[key];
    if (value === undefined || value === "")
      throw new PartnerApiError({ status: 0, code: "invalid_request", message: `${key} is required` });
    return encodeURIComponent(String(value));
  });
  let body: string | undefined;
  let query = "";
  if (rule.body === "*") body = JSON.stringify(fields);
  else if (rule.body) body = JSON.stringify(fields[jsonNameOf(input, rule.body)] ?? {});
  else {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(fields)) {
      for (const item of Array.isArray(v) ? v : [v])
        params.append(k, typeof item === "string" ? item : JSON.stringify(item));
    }
    query = params.size ? `?${params}` : "";
  }
  const headers: Record<string, string> = { authorization: `Bearer ${o.apiKey}`, accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (rule.verb === "POST")
    headers["idempotency-key"] = call.idempotencyKey ?? globalThis.crypto.randomUUID();
  const url = `${o.baseUrl.replace(/\/+$/, "")}${path}${query}`;

  const res = await withRetries(o, () =>
    (o.fetch ?? globalThis.fetch)(url, { method: rule.verb, headers, body, signal: call.signal }),
  );
  if (method.output.typeName === HttpBodySchema.typeName) {
    return create(HttpBodySchema, {
      contentType: res.headers.get("content-type") ?? "",
      data: new Uint8Array(await res.arrayBuffer()),
    }) as unknown;
  }
  const json = (await res.json()) as JsonValue;
  const whole = rule.responseBody ? { [jsonNameOf(method.output, rule.responseBody)]: json } : json;
  return fromJson(method.output, whole, { ignoreUnknownFields: true });
}

/** Sends, and sends again while the answer says to (429, 5xx, a key still in use, no answer at all). */
async function withRetries(o: PartnerClientOptions, send: () => Promise<Response>): Promise<Response> {
  const maxRetries = o.maxRetries ?? 3;
  const maxDelayMs = o.maxRetryDelayMs ?? 30_000;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 0; ; attempt++) {
    let error: PartnerApiError;
    try {
      const res = await send();
      if (res.ok) return res;
      error = await errorOf(res);
      const retryable = RETRY_STATUSES.has(res.status) || error.code === "idempotency_key_in_use";
      if (!retryable || attempt >= maxRetries) throw error;
      // Asked to wait longer than we would (a daily limit: until midnight in Lagos): a sooner retry would only
      // be refused again, so the caller hears it now.
      if (error.retryAfterSeconds !== undefined && error.retryAfterSeconds * 1000 > maxDelayMs) throw error;
    } catch (err) {
      if (err instanceof PartnerApiError) throw err;
      if ((err as Error).name === "AbortError" || attempt >= maxRetries)
        throw new PartnerApiError({ status: 0, code: "network_error", message: (err as Error).message });
      error = new PartnerApiError({ status: 0, code: "network_error", message: (err as Error).message });
    }
    const backoff = Math.min(maxDelayMs, (o.retryBaseMs ?? 250) * 2 ** attempt);
    const wait =
      error.retryAfterSeconds !== undefined
        ? Math.min(maxDelayMs, error.retryAfterSeconds * 1000)
        : backoff / 2 + Math.random() * (backoff / 2);
    await sleep(wait);
  }
}

async function errorOf(res: Response): Promise<PartnerApiError> {
  const retryAfter = parseRetryAfter(res.headers.get("retry-after"));
  let body: { code?: string; message?: string; requestId?: string; details?: Record<string, unknown> } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // Not the API's JSON (a proxy's page): the status says enough.
  }
  return new PartnerApiError({
    status: res.status,
    code: body.code ?? `http_${res.status}`,
    message: body.message ?? res.statusText,
    requestId: body.requestId ?? res.headers.get("x-request-id") ?? "",
    details: body.details,
    retryAfterSeconds: retryAfter,
  });
}

/** `Retry-After` as seconds: a number of seconds or an HTTP date. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
