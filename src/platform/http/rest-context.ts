import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext } from "@connectrpc/connect";
import type { AnyRequest } from "./request-body.ts";
import type { Route } from "./rest-routes.ts";

/**
 * The handler context of a REST call. Connect's `createHandlerContext` copies the request headers into a new
 * `Headers`, and makes two linked AbortControllers and a trailer per call; on a read served from caches they
 * cost as much as the rest of the request. Here the signal and the trailer are made only when a handler reads
 * them (`abort` makes the signal already aborted). A class: getters on an object literal are defined anew on
 * every object.
 */
export class RestContext implements HandlerContext {
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

/** A Node request's headers as Fetch `Headers`, without HTTP/2's pseudo-headers (`:path`, `:method`, …). */
export function headersOf(req: AnyRequest): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) h.append(k, item);
    else h.set(k, String(v));
  }
  return h;
}
