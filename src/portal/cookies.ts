import { ApiError } from "../platform/errors.ts";
import { SESSION_ABSOLUTE_MS } from "./session.service.ts";

/** The session cookie's name. */
export const SESSION_COOKIE = "portal_session";

/** The value of cookie `name` in a request's `Cookie` header. */
export function cookieOf(header: Headers, name: string): string | undefined {
  const raw = header.get("cookie");
  if (!raw) return undefined;
  for (const part of raw.split(";")) {
    const at = part.indexOf("=");
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Path=/
 * (the portal calls the API at the root), Secure when the service is served over https.
 */
export function sessionCookie(token: string, publicUrl: string): string {
  const secure = publicUrl.startsWith("https:") ? "; Secure" : "";
  return `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${SESSION_ABSOLUTE_MS / 1000}${secure}`;
}

/** Clears the session cookie in the browser. */
export function clearedCookie(publicUrl: string): string {
  const secure = publicUrl.startsWith("https:") ? "; Secure" : "";
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure}`;
}

/**
 * The CSRF defence of every cookie-authenticated call (docs/portal.md): besides the cookie's SameSite=Strict,
 * an `Origin` equal to the service's own origin: PUBLIC_URL's alone when it is set (`fixed`), else the
 * listener's or the origin the request was addressed to (a `Host` is the client's to write),
 * and Connect's `connect-protocol-version: 1` header, which no cross-site HTML form can send and which a
 * cross-site script cannot send without a CORS preflight the portal's paths never grant.
 */
export function requireSameOrigin(
  header: Headers,
  publicUrl: string,
  requestHost: string,
  fixed = false,
): void {
  if (header.get("connect-protocol-version") !== "1")
    throw new ApiError(
      "permission_denied",
      "A portal call must use the Connect protocol (connect-protocol-version: 1).",
    );
  const origin = header.get("origin");
  // `Host`, or HTTP/2's `:authority` as the listener saw it (a Headers object cannot hold a pseudo-header).
  const host = header.get("host") ?? (requestHost || null);
  let ok = false;
  if (origin && origin !== "null") {
    try {
      const own = new URL(publicUrl).origin;
      // Exactly an origin as a browser writes it: scheme and host in lower case, no path, no trailing slash.
      ok =
        origin === own ||
        (!fixed && host !== null && (origin === `http://${host}` || origin === `https://${host}`));
    } catch {
      ok = false;
    }
  }
  if (!ok) throw new ApiError("permission_denied", "A portal call must come from the portal's own origin.");
}
