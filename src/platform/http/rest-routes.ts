import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { resolvePath } from "./field-paths.ts";
import { compileTemplate, type PathTemplate } from "./path-template.ts";
import { type RestBinding, restBindings } from "./rules.ts";

type UnaryFn = (req: unknown, ctx: HandlerContext) => unknown;

/** A service and the one implementation that serves it on every face. */
export interface ServiceBinding {
  service: DescService;
  impl: Record<string, unknown>;
}

/** One REST route: a method's `google.api.http` binding and the implementation's function that serves it. */
export interface Route {
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

/** Every unary method's REST bindings, most specific template first. */
export function buildRoutes(services: ServiceBinding[]): Route[] {
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
export function routeIndex(routes: Route[]): (path: string) => Route[] {
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

// A request target of path and query characters only, with no dot segment (`.`, `..`, or either spelled
// `%2e`) and no empty segment: what `new URL` would give back unchanged, so it is split by hand (parsing a URL
// costs more than routing it). Anything else goes through `new URL`.
const PLAIN_TARGET =
  /^(?!.*\/\.{1,2}(?:[/?#]|$))(?!.*\/\/)(?!.*%2[eE])\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*(?:\?[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*)?$/;

/**
 * The path and the query of a request target, as `new URL(target, base)` reads them. The query keeps its `?`:
 * `URLSearchParams` drops one leading `?` itself, so `??a=1` names the parameter `?a`, as it always did.
 */
export function splitTarget(target: string): { pathname: string; search: string } {
  if (PLAIN_TARGET.test(target)) {
    const q = target.indexOf("?");
    return q === -1
      ? { pathname: target, search: "" }
      : { pathname: target.slice(0, q), search: target.slice(q) };
  }
  const url = new URL(target, "http://localhost");
  return { pathname: url.pathname, search: url.search };
}

/** Whether every percent-escape in `path` decodes, and they spell valid UTF-8. */
export function wellEncoded(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}
