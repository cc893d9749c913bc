import { readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import path from "node:path";
import { ApiError } from "../platform/errors.ts";
import { writeRestError } from "../platform/http/rest-errors.ts";

/** Where the portal lives on the partner listener. */
export const PORTAL_PREFIX = "/portal";
const ASSETS = `${PORTAL_PREFIX}/assets/`;

/**
 * The portal page's policy: scripts, styles and API calls from this origin only, no inline script or style,
 * no framing, no plug-ins, forms only back to us (docs/portal.md).
 */
export const PORTAL_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": PORTAL_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=()",
};

interface Asset {
  type: string;
  plain: Buffer;
  gzip: Buffer;
  br: Buffer;
}

/** The built portal: the shell and its hashed assets, read into memory once (a few hundred KiB). */
export interface PortalAssets {
  /** Answers a GET or HEAD under /portal; false when the path is not the portal's. */
  serve(
    req: { method?: string; url?: string; headers: Record<string, unknown> },
    res: ServerResponse | Http2ServerResponse,
    requestId: string,
  ): boolean;
}

const TYPES: Record<string, string> = {
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
};

/**
 * Loads `dist/portal` (built by `npm install` / `scripts/build-portal.ts`). A missing build is not fatal to
 * the API: the portal then answers 503 saying how to build it.
 */
export function loadPortalAssets(dir = path.resolve(import.meta.dirname, "../../dist/portal")): PortalAssets {
  let shell: Buffer | undefined;
  const assets = new Map<string, Asset>();
  try {
    const manifest = JSON.parse(readFileSync(path.join(dir, "manifest.json"), "utf8")) as {
      files: Record<string, { file: string }>;
    };
    shell = readFileSync(path.join(dir, "index.html"));
    for (const [ext, { file }] of Object.entries(manifest.files)) {
      const at = (suffix: string) => readFileSync(path.join(dir, "assets", `${file}${suffix}`));
      assets.set(file, {
        type: TYPES[ext] ?? "application/octet-stream",
        plain: at(""),
        gzip: at(".gz"),
        br: at(".br"),
      });
    }
  } catch {
    shell = undefined;
  }
  return {
    serve(req, res, requestId) {
      const url = req.url ?? "/";
      const pathOnly = url.split("?")[0] ?? "";
      if (pathOnly !== PORTAL_PREFIX && !pathOnly.startsWith(`${PORTAL_PREFIX}/`)) return false;
      if (req.method !== "GET" && req.method !== "HEAD") {
        writeRestError(res, new ApiError("method_not_allowed", "Use GET."), requestId);
        return true;
      }
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
      if (!shell) {
        writeRestError(
          res,
          new ApiError("unavailable", "The portal is not built on this server: run `npm install`."),
          requestId,
        );
        return true;
      }
      let body: Buffer;
      if (pathOnly.startsWith(ASSETS)) {
        const asset = assets.get(pathOnly.slice(ASSETS.length));
        if (!asset) {
          writeRestError(res, new ApiError("not_found", "No such portal file."), requestId);
          return true;
        }
        // Content-hashed names never change meaning: cached for a year, never asked again.
        const accepts = String(req.headers["accept-encoding"] ?? "");
        const [encoding, bytes] = /\bbr\b/.test(accepts)
          ? ["br", asset.br]
          : /\bgzip\b/.test(accepts)
            ? ["gzip", asset.gzip]
            : [undefined, asset.plain];
        res.setHeader("content-type", asset.type);
        res.setHeader("cache-control", "public, max-age=31536000, immutable");
        res.setHeader("vary", "accept-encoding");
        if (encoding) res.setHeader("content-encoding", encoding);
        body = bytes;
      } else {
        // Every other portal path is a page of the one-page app: the same shell, always revalidated so a new
        // release's asset names are picked up at once.
        res.setHeader("content-type", "text/html; charset=utf-8");
        res.setHeader("cache-control", "no-cache");
        body = shell;
      }
      res.setHeader("content-length", body.length);
      res.statusCode = 200;
      res.end(req.method === "HEAD" ? "" : body);
      return true;
    },
  };
}
