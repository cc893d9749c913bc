import { PAYSTACK_WEBHOOK_PATH } from "../disbursements/provider-webhooks.ts";
import { docsPaths } from "../docs/reference.ts";
import { type AnyRequest, routeLabelOf } from "../platform/http/transcoder.ts";
import { outcomeIfAny } from "../platform/rpc/context.ts";
import { PORTAL_PREFIX } from "../portal/web-assets.ts";

/** A Connect or gRPC procedure path: `/package.Service/Method`. */
export const PROCEDURE = /^\/[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.[A-Z][A-Za-z0-9]*\/[A-Z][A-Za-z0-9]*$/;

/** The hosted pages: no API key, so limited per client address. */
export const PAGE_PREFIXES = ["/consent/", "/mandate/", "/prompt/"];

/** The paths served as they are, by no handler of a service: health, metrics, the API's documents, the provider. */
export const FIXED_PATHS = new Set([
  "/healthz",
  "/readyz",
  "/metrics",
  docsPaths.openapi,
  docsPaths.reference,
  PAYSTACK_WEBHOOK_PATH,
]);

/** A bounded route label (a template, a procedure or a fixed path; never an id) and the face it came in on. */
export function routeOf(req: AnyRequest, path: string, status: number): { face: string; route: string } {
  const rest = routeLabelOf(req);
  if (rest) return { face: "rest", route: rest };
  // The API's documents live under /partner/v1 too.
  if (FIXED_PATHS.has(path)) return { face: "http", route: path };
  if (path.startsWith("/partner/")) return { face: "rest", route: "unmatched" };
  const page = pageRoute(path);
  if (page) return { face: "page", route: page };
  const type = String(req.headers["content-type"] ?? "");
  const face = type.startsWith("application/grpc-web")
    ? "grpc-web"
    : type.startsWith("application/grpc")
      ? "grpc"
      : "connect";
  // A 404 is an unknown procedure, unless a handler answered it (Connect answers `not_found` as HTTP 404 too).
  const known = status !== 404 || outcomeIfAny(req)?.error !== undefined;
  return { face, route: PROCEDURE.test(path) && known ? path : "unmatched" };
}

/** The template of a hosted page's or the portal's path (its token is a credential: never in a label). */
function pageRoute(path: string): string | undefined {
  if (path.startsWith("/consent/")) return "/consent/{token}";
  if (path.startsWith("/mandate/")) return "/mandate/{token}";
  if (path.startsWith("/prompt/")) return "/prompt/{token}";
  if (path.startsWith(`${PORTAL_PREFIX}/assets/`)) return "/portal/assets/{file}";
  if (path === PORTAL_PREFIX || path.startsWith(`${PORTAL_PREFIX}/`)) return "/portal";
  return undefined;
}
