import { PAYSTACK_WEBHOOK_PATH } from "../disbursements/provider-webhooks.ts";
import type { Orm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { createCors } from "../platform/http/cors.ts";
import type { Handler } from "../platform/http/listener.ts";
import { type AnyResponse, writeRestError } from "../platform/http/rest-errors.ts";
import type { AnyRequest, Transcoder } from "../platform/http/transcoder.ts";
import type { Logger } from "../platform/logger.ts";
import { loadPortalAssets, PORTAL_PREFIX } from "../portal/web-assets.ts";
import { PORTAL_PROCEDURES } from "./bindings.ts";
import type { EdgeServices } from "./dependencies.ts";
import { receiveProviderWebhook, serveDocs, serveHealth } from "./fixed-routes.ts";
import { requestIdOf } from "./request-id.ts";
import { PROCEDURE } from "./routes.ts";

/** What the partner listener routes to. */
export interface PartnerRoutes {
  services: EdgeServices;
  orm: Orm;
  logger: Logger;
  corsOrigins: readonly string[];
  ready: () => Promise<boolean>;
  /** The REST face (`/partner/v1/…`). */
  rest: Transcoder;
  /** Connect, gRPC-Web and gRPC for the partner services (and reflection). */
  connect: Handler;
  /** Connect for the portal's own services, behind the portal's edge. */
  portalConnect: Handler;
}

/**
 * The partner listener's routing table, by path: the portal's services, CORS for browser clients of the API,
 * the API's documents, REST, the portal's assets, the hosted pages, the provider's webhook, health, and
 * Connect, gRPC-Web and gRPC for everything else.
 */
export function partnerRoutes(o: PartnerRoutes): Handler {
  const { services, orm, logger } = o;
  const cors = createCors(o.corsOrigins);
  const portalAssets = loadPortalAssets();
  /** Answers a page request whose handler failed unexpectedly (never leaves it hanging, never crashes). */
  const pageFailed = (req: AnyRequest, res: AnyResponse) => (err: unknown) => {
    logger.error("page failed", { err, requestId: requestIdOf(req) });
    if (res.headersSent) return void res.end("");
    writeRestError(res, new ApiError("internal"), requestIdOf(req));
  };
  return (req, res) => {
    const url = req.url ?? "/";
    if (url.startsWith(PORTAL_PROCEDURES)) return o.portalConnect(req, res);
    // Browser clients of the API (REST, Connect, gRPC-Web, the OpenAPI document) from listed origins; never
    // the hosted pages, which are forms of their own.
    if ((url.startsWith("/partner/") || PROCEDURE.test(url.split("?")[0] ?? "")) && cors(req, res)) return;
    if (serveDocs(req, res, url)) return;
    if (url.startsWith("/partner/")) return void o.rest.handle(req, res, requestIdOf(req));
    if (url.startsWith(PORTAL_PREFIX) && portalAssets.serve(req, res, requestIdOf(req))) return;
    // The pages answer their own errors; a rejection that escapes them is answered 500 here, so no request can
    // bring the process down.
    const page = url.startsWith("/consent/")
      ? services.hostedPages.consent
      : url.startsWith("/mandate/")
        ? services.hostedPages.mandate
        : url.startsWith("/prompt/")
          ? services.hostedPages.prompt
          : undefined;
    if (page) return void page(orm.em.fork(), req, res, requestIdOf(req)).catch(pageFailed(req, res));
    if (url === PAYSTACK_WEBHOOK_PATH && services.providerWebhooks.enabled())
      return void receiveProviderWebhook(orm.em.fork(), services.providerWebhooks, req, res, logger);
    if (serveHealth(url, res, o.ready)) return;
    o.connect(req, res);
  };
}
