import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { promisify } from "node:util";
import zlib from "node:zlib";
import {
  create,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromJson,
  type JsonValue,
  type Message,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext } from "@connectrpc/connect";
import { ApiError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import { requestValues } from "../rpc/context.ts";
import { toApiError } from "../rpc/errors.ts";
import type { Edge } from "../rpc/pipeline.ts";
import { checkInt64Json } from "./int64-json.ts";
import { compileTemplate, type PathTemplate } from "./path-template.ts";
import { type AnyResponse, writeRestError } from "./rest-errors.ts";
import { type RestBinding, restBindings } from "./rules.ts";

/** Either kind of Node request the partner listener hands out. */
export type AnyRequest = IncomingMessage | Http2ServerRequest;

type UnaryFn = (req: unknown, ctx: HandlerContext) => unknown;

/** A service and the one implementation that serves it on every face. */
export interface ServiceBinding {
  service: DescService;
  impl: Record<string, unknown>;
}

interface Route {
  service: DescService;
  method: DescMethod;
  binding: RestBinding;
  template: PathTemplate;
  fn: UnaryFn;
  /** JSON name of `response_body`, when the rule names one. */
  responseField: string | undefined;
  /** Response JSON by message object, for handlers that return cached immutable messages. */
  memo: WeakMap<object, string>;
}

/** Options for {@link createTranscoder}. */
export interface TranscoderOptions {
  services: ServiceBinding[];
  edge: Edge;
  logger: Logger;
  /** Largest accepted request body. */
  maxBodyBytes: number;
}

/** The REST face: routes `/partner/v1/...` by the `google.api.http` options to the Connect implementations. */
export interface Transcoder {
  handle(req: AnyRequest, res: AnyResponse, requestId: string): Promise<void>;
  /** Every route, as `VERB template`, for documentation and tests. */
  readonly routes: readonly string[];
}

const jsonWrite = { alwaysEmitImplicit: true } as const;

const EMPTY = Buffer.alloc(0);

const ROUTE = Symbol("route");
type Routed = { [ROUTE]?: string };

/**
 * The route template the REST face matched for a request, for metrics and access logs. A symbol property, like
 * the request id the listener sets: a WeakMap entry per request costs a hash insert and ephemeron work in
 * every young-generation collection.
 */
export const routeLabelOf = (req: object): string | undefined => (req as Routed)[ROUTE];

/**
 * The handler context of a REST call. Connect's `createHandlerContext` copies the request headers into a new
 * `Headers`, and makes two linked AbortControllers and a trailer per call; on a read served from caches they
 * cost as much as the rest of the request. Here the signal and the trailer are made only when a handler reads
 * them (`abort` makes the signal already aborted). A class: getters on an object literal are defined anew on
 * every object.
 */
class RestContext implements HandlerContext {
  readonly protocolName = "rest";
  readonly responseHeader = new Headers();
  #controller: AbortController | undefined;
  #trailer: Headers | undefined;
  readonly service: DescService;
  readonly method: DescMethod;
  readonly requestMethod: string;
  readonly url: string;
  readonly requestHeader: Headers;
  readonly values: ContextValues;

  constructor(route: Route, url: string, requestHeader: Headers, values: ContextValues) {
    this.url = url;
    this.requestHeader = requestHeader;
    this.values = values;
    this.service = route.service;
    this.method = route.method;
    this.requestMethod = route.binding.verb;
  }

  timeoutMs(): number | undefined {
    return undefined;
  }

  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  get responseTrailer(): Headers {
    this.#trailer ??= new Headers();
    return this.#trailer;
  }

  abort(reason?: unknown): void {
    this.#controller ??= new AbortController();
    this.#controller.abort(reason);
  }
}

// A request target of path and query characters only, with no dot segment (`.`, `..`, or either spelled
// `%2e`) and no empty segment: what `new URL` would give back unchanged, so it is split by hand (parsing a URL
// costs more than routing it). Anything else goes through `new URL`.
const PLAIN_TARGET =
  /^(?!.*\/\.{1,2}(?:[/?#]|$))(?!.*\/\/)(?!.*%2[eE])\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*(?:\?[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*)?$/;

/**
 * The path and the query of a request target, as `new URL(target, base)` reads them. The query keeps its `?`:
 * `URLSearchParams` drops one leading `?` itself, so `??a=1` names the parameter `?a`, as it always did.
 */
function splitTarget(target: string): { pathname: string; search: string } {
  if (PLAIN_TARGET.test(target)) {
    const q = target.indexOf("?");
    return q === -1
      ? { pathname: target, search: "" }
      : { pathname: target.slice(0, q), search: target.slice(q) };
  }
  const url = new URL(target, "http://localhost");
  return { pathname: url.pathname, search: url.search };
}

const inflaters: Record<string, (buf: Buffer, o: zlib.ZlibOptions & zlib.BrotliOptions) => Promise<Buffer>> =
  {
    gzip: promisify(zlib.gunzip),
    "x-gzip": promisify(zlib.gunzip),
    deflate: promisify(zlib.inflate),
    br: promisify(zlib.brotliDecompress),
  };

/**
 * A body sent with `Content-Encoding` gzip, deflate or br, decompressed to at most `limit` bytes: a body that
 * inflates past it (a decompression bomb) is `413 payload_too_large`, found without ever holding more than the
 * limit; another encoding is `415`; bytes that do not decompress are `400`.
 */
export async function decodeContent(req: AnyRequest, raw: Buffer, limit: number): Promise<Buffer> {
  const encoding = String(req.headers["content-encoding"] ?? "identity")
    .trim()
    .toLowerCase();
  if (encoding === "identity" || encoding === "" || raw.length === 0) return raw;
  const inflate = inflaters[encoding];
  if (!inflate)
    throw new ApiError(
      "unsupported_media_type",
      "Send the body as application/json, uncompressed or with Content-Encoding gzip, deflate or br.",
    );
  try {
    return await inflate(raw, { maxOutputLength: limit });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE")
      throw new ApiError(
        "payload_too_large",
        `The request body is larger than ${limit} bytes once decompressed.`,
      );
    throw new ApiError("invalid_request", `The request body is not valid ${encoding} data.`);
  }
}

/** Reads the body up to a limit; rejects with `payload_too_large` beyond it. */
export async function readBody(req: AnyRequest, limit: number): Promise<Buffer> {
  // HTTP/1.1 without Content-Length or Transfer-Encoding has no body; HTTP/2 may stream one without either.
  const h = req.headers;
  if (h["content-length"] === undefined && h["transfer-encoding"] === undefined && req.httpVersionMajor < 2)
    return EMPTY;
  if (req.readableEnded) return EMPTY;
  const declared = Number(h["content-length"] ?? 0);
  if (declared > limit) throw new ApiError("payload_too_large");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new ApiError("payload_too_large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function headersOf(req: AnyRequest): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) h.append(k, item);
    else h.set(k, String(v));
  }
  return h;
}

/** Finds a field by proto name or JSON name. */
function fieldOf(message: DescMessage, name: string): DescField | undefined {
  return message.fields.find((f) => f.name === name || f.jsonName === name);
}

/** Resolves a dotted field path to the JSON names along it and the leaf field. */
function resolvePath(message: DescMessage, path: string): { names: string[]; leaf: DescField } | undefined {
  const names: string[] = [];
  let current: DescMessage | undefined = message;
  let leaf: DescField | undefined;
  for (const part of path.split(".")) {
    if (!current) return undefined;
    leaf = fieldOf(current, part);
    if (!leaf) return undefined;
    names.push(leaf.jsonName);
    current = leaf.fieldKind === "message" ? leaf.message : undefined;
  }
  return leaf ? { names, leaf } : undefined;
}

function assign(target: Record<string, JsonValue>, names: string[], value: JsonValue, append: boolean): void {
  let obj = target;
  for (const name of names.slice(0, -1)) {
    const next = obj[name];
    if (typeof next !== "object" || next === null || Array.isArray(next)) obj[name] = {};
    obj = obj[name] as Record<string, JsonValue>;
  }
  const last = names[names.length - 1] as string;
  if (append) {
    const prev = obj[last];
    obj[last] = Array.isArray(prev) ? [...prev, value] : [value];
  } else {
    obj[last] = value;
  }
}

const INTEGER_TYPES = new Set([
  ScalarType.INT32,
  ScalarType.SINT32,
  ScalarType.SFIXED32,
  ScalarType.UINT32,
  ScalarType.FIXED32,
]);

/** Contract error codes for query parameters that must be integers (CONTRACT.md §3 `invalid_ledger_window`). */
const integerFieldCodes: Record<string, "invalid_ledger_window"> = {
  "partner.v1.GetSnapshotRequest.ledger_window_days": "invalid_ledger_window",
};

/** A query or path string as the JSON value the field's parser expects. */
function scalarFromString(field: DescField, raw: string): JsonValue {
  if (
    (field.fieldKind === "scalar" || field.fieldKind === "list") &&
    field.scalar !== undefined &&
    INTEGER_TYPES.has(field.scalar)
  ) {
    const n = Number(raw);
    if (!/^-?\d{1,10}$/.test(raw) || n > 2_147_483_647 || n < -2_147_483_648) {
      const code = integerFieldCodes[`${field.parent.typeName}.${field.name}`];
      throw code
        ? new ApiError(code)
        : new ApiError("invalid_argument", `"${field.name}" must be an integer.`);
    }
    return n;
  }
  if ((field.fieldKind === "scalar" || field.fieldKind === "list") && field.scalar === ScalarType.BOOL) {
    if (raw === "true" || raw === "1") return true;
    if (raw === "false" || raw === "0") return false;
    throw new ApiError("invalid_argument", `"${field.name}" must be true or false.`);
  }
  return raw;
}

function buildRoutes(services: ServiceBinding[]): Route[] {
  const routes: Route[] = [];
  for (const { service, impl } of services) {
    for (const method of service.methods) {
      if (method.methodKind !== "unary") continue;
      const fn = impl[method.localName];
      if (typeof fn !== "function") continue;
      for (const binding of restBindings(method)) {
        const responseField = binding.responseBody
          ? resolvePath(method.output, binding.responseBody)?.names[0]
          : undefined;
        if (binding.responseBody && !responseField) {
          throw new Error(
            `response_body "${binding.responseBody}" is not a field of ${method.output.typeName}`,
          );
        }
        routes.push({
          service,
          method,
          binding,
          template: compileTemplate(binding.template),
          fn: fn.bind(impl),
          responseField,
          memo: new WeakMap(),
        });
      }
    }
  }
  // The most literal template wins when two match (`/users/me` before `/users/{id}`).
  return routes.sort((a, b) => b.template.specificity - a.template.specificity);
}

/** The path segment routes are indexed by: `keys` in `/partner/v1/keys`, `users` in `/partner/v1/users/…`. */
const INDEXED_SEGMENT = 3;

/** A path's indexed segment, without a custom verb (`sandbox` of `sandbox:reset`). */
function indexKey(path: string): string | undefined {
  const segment = path.split("/", INDEXED_SEGMENT + 1)[INDEXED_SEGMENT];
  return segment?.split(":", 1)[0];
}

/**
 * The routes that can match a path, most specific first: those whose indexed segment is that literal, and those
 * with a variable or wildcard there. Matching every template's regex in turn cost more than the rest of routing a
 * cached read.
 */
function routeIndex(routes: Route[]): (path: string) => Route[] {
  const wild: Route[] = [];
  const byKey = new Map<string, Route[]>();
  for (const route of routes) {
    const source = route.binding.template;
    const prefix = source.split("/", INDEXED_SEGMENT + 1).join("/");
    const key = /[{}*]/.test(prefix) ? undefined : indexKey(source);
    if (key === undefined) wild.push(route);
    else byKey.set(key, [...(byKey.get(key) ?? []), route]);
  }
  const order = new Map(routes.map((r, i) => [r, i]));
  const merged = new Map(
    [...byKey].map(([key, list]) => [
      key,
      [...list, ...wild].sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0)),
    ]),
  );
  return (path) => {
    const key = indexKey(path);
    return (key === undefined ? undefined : merged.get(key)) ?? wild;
  };
}

/** Whether a body is an empty JSON object (`{}`, whitespace allowed): what clients send when there is nothing. */
function isEmptyObject(raw: Buffer): boolean {
  if (raw.length > 64) return false;
  try {
    const parsed: unknown = JSON.parse(raw.toString("utf8"));
    return (
      typeof parsed === "object" &&
      parsed !== null &&
      !Array.isArray(parsed) &&
      Object.keys(parsed).length === 0
    );
  } catch {
    return false;
  }
}

/** Creates the REST transcoder over the given services. */
export function createTranscoder({ services, edge, logger, maxBodyBytes }: TranscoderOptions): Transcoder {
  const routes = buildRoutes(services);
  const candidates = routeIndex(routes);

  const requestJson = async (
    req: AnyRequest,
    route: Route,
    vars: Record<string, string>,
    query: URLSearchParams | undefined,
  ): Promise<Record<string, JsonValue>> => {
    const input = route.method.input;
    const { body } = route.binding;
    let json: Record<string, JsonValue> = {};
    const raw = await decodeContent(req, await readBody(req, maxBodyBytes), maxBodyBytes);
    if (body === "") {
      // Many HTTP clients send `{}` by default: an empty JSON object says nothing, so it is taken as no body.
      if (raw.length > 0 && !isEmptyObject(raw)) {
        throw new ApiError("invalid_request", "This endpoint takes no request body.");
      }
    } else if (raw.length > 0) {
      const type = String(req.headers["content-type"] ?? "");
      if (!/^application\/json\s*(;|$)/i.test(type)) throw new ApiError("unsupported_media_type");
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw.toString("utf8"));
      } catch {
        throw new ApiError("invalid_request", "The request body is not valid JSON.");
      }
      if (body === "*") {
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          throw new ApiError("invalid_request", "The request body must be a JSON object.");
        }
        json = parsed as Record<string, JsonValue>;
      } else {
        const target = resolvePath(input, body);
        if (!target) throw new Error(`google.api.http body "${body}" is not a field of ${input.typeName}`);
        assign(json, target.names, parsed as JsonValue, false);
      }
    }
    const seen = new Set<string>();
    for (const [key, value] of query ?? []) {
      const target = body === "*" ? undefined : resolvePath(input, key);
      if (!target || target.leaf.fieldKind === "message" || target.leaf.fieldKind === "map") {
        throw new ApiError("invalid_argument", `Unknown query parameter "${key}".`);
      }
      // One value for a field that holds one: `?limit=1&limit=1000` is refused, not read as its last value.
      if (target.leaf.fieldKind !== "list") {
        if (seen.has(key))
          throw new ApiError("invalid_argument", `Query parameter "${key}" is given more than once.`);
        seen.add(key);
      }
      assign(json, target.names, scalarFromString(target.leaf, value), target.leaf.fieldKind === "list");
    }
    for (const [path, value] of Object.entries(vars)) {
      const target = resolvePath(input, path);
      if (!target) throw new Error(`path variable "${path}" is not a field of ${input.typeName}`);
      assign(json, target.names, scalarFromString(target.leaf, value), false);
    }
    return json;
  };

  const invoke = async (
    req: AnyRequest,
    res: AnyResponse,
    route: Route,
    requestId: string,
    search: string,
    vars: Record<string, string>,
  ) => {
    const values = requestValues(requestId, req);
    const ctx = new RestContext(route, `http://localhost${req.url ?? "/"}`, headersOf(req), values);
    // The handler's signal fires when the client goes away mid-request (not after every request: creating
    // the abort reason costs as much as the rest of a cached read).
    const onClose = () => {
      if (!res.writableFinished) ctx.abort();
    };
    res.on("close", onClose);
    try {
      const call = {
        method: route.method,
        requestHeader: ctx.requestHeader,
        values,
        responseHeader: ctx.responseHeader,
      };
      // A request whose body is still to come (HTTP/1.1 with a length or chunks; any HTTP/2 stream) is admitted
      // now, so a bad key costs no body, and confirmed once the body is in (Edge.confirm).
      const h = req.headers;
      const bodyToCome =
        !req.readableEnded &&
        (req.httpVersionMajor >= 2 ||
          h["content-length"] !== undefined ||
          h["transfer-encoding"] !== undefined);
      await edge.admit(call);
      const json = await requestJson(
        req,
        route,
        vars,
        search === "" ? undefined : new URLSearchParams(search),
      );
      if (bodyToCome) await edge.confirm?.(call);
      checkInt64Json(route.method.input, json);
      let request: Message;
      try {
        request = fromJson(route.method.input, json);
      } catch (err) {
        throw new ApiError(
          "invalid_request",
          (err as Error).message.replace(/^cannot decode /, "Cannot read "),
        );
      }
      // The edge checks the contract's rules first (src/edge/validation.ts), as on the Connect and gRPC faces.
      const output = await edge.invoke(call, request, async () => route.fn(request, ctx));
      if (route.method.output.typeName === "google.api.HttpBody") {
        // google.api.HttpBody: the handler's bytes are the response, as they are.
        const body = output as { contentType: string; data: Uint8Array };
        ctx.responseHeader.forEach((v, k) => {
          res.setHeader(k, v);
        });
        res.setHeader("content-type", body.contentType);
        res.setHeader("content-length", body.data.byteLength);
        res.statusCode = 200;
        res.end(Buffer.from(body.data.buffer, body.data.byteOffset, body.data.byteLength) as never);
        return;
      }
      const message = create(route.method.output, output as never);
      // A handler that returns the very message it returned before (a cached, immutable response) gets
      // the JSON made the first time.
      let payload = output === message ? route.memo.get(message) : undefined;
      if (payload === undefined) {
        const out = toJson(route.method.output, message, jsonWrite) as Record<string, JsonValue>;
        payload = JSON.stringify(route.responseField ? (out[route.responseField] ?? null) : out);
        if (output === message) route.memo.set(message, payload);
      }
      ctx.responseHeader.forEach((v, k) => {
        res.setHeader(k, v);
      });
      res.setHeader("content-type", "application/json; charset=utf-8");
      res.setHeader("content-length", Buffer.byteLength(payload));
      res.statusCode = 200;
      res.end(payload);
    } catch (err) {
      writeRestError(res, toApiError(err, logger.child({ requestId })), requestId, ctx.responseHeader);
    } finally {
      res.off("close", onClose);
    }
  };

  return {
    routes: routes.map((r) => `${r.binding.verb} ${r.binding.template}`),
    async handle(req, res, requestId) {
      const url = splitTarget(req.url ?? "/");
      // A path whose percent-encoding is not UTF-8 (`%zz`, `%E0%A4%A`) names nothing: it is refused as such, on
      // every route, rather than read as an id that happens to hold a percent sign.
      if (url.pathname.includes("%") && !wellEncoded(url.pathname)) {
        req.resume();
        return writeRestError(
          res,
          new ApiError("invalid_argument", "The path's percent-encoding is not valid UTF-8."),
          requestId,
        );
      }
      let allowed: string[] = [];
      // HEAD is GET without the body (Node writes none for a HEAD request): the same headers, length included.
      const verb = req.method === "HEAD" ? "GET" : req.method;
      for (const route of candidates(url.pathname)) {
        const vars = route.template.match(url.pathname);
        if (!vars) continue;
        if (route.binding.verb === verb) {
          (req as Routed)[ROUTE] = route.binding.template;
          return invoke(req, res, route, requestId, url.search, vars);
        }
        allowed.push(route.binding.verb);
        if (route.binding.verb === "GET") allowed.push("HEAD");
      }
      // Drain what the client sent so the connection can be reused.
      req.resume();
      if (allowed.length > 0) {
        allowed = [...new Set(allowed)];
        res.setHeader("allow", allowed.join(", "));
        return writeRestError(
          res,
          new ApiError("method_not_allowed", `Use ${allowed.join(" or ")} on ${url.pathname}.`),
          requestId,
        );
      }
      writeRestError(res, new ApiError("not_found", `No route ${req.method} ${url.pathname}.`), requestId);
    },
  };
}

/** Whether every percent-escape in `path` decodes, and they spell valid UTF-8. */
function wellEncoded(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}
