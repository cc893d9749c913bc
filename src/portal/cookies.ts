import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { ApiError } from "../platform/errors.ts";
import { DEVICE_COOKIE_MS } from "./device-cookie.ts";
import { SESSION_ABSOLUTE_MS } from "./session.service.ts";

/** The session cookie's name. */
export const SESSION_COOKIE = "portal_session";

/** The device cookie's name: a browser that has signed in as a member (see device-cookie.ts). */
export const DEVICE_COOKIE = "portal_device";

/** Sign-in is the one call that reads the device cookie, so it is the one call the browser sends it with. */
export const DEVICE_COOKIE_PATH = `/${PortalAuthService.typeName}/${PortalAuthService.method.signIn.name}`;

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

/**
 * The device cookie: HttpOnly, SameSite=Strict, sent only with sign-in (its path), Secure when the service is
 * served over https, kept 180 days (each successful sign-in issues it again, so a browser in use stays known).
 */
export function deviceCookie(value: string, publicUrl: string): string {
  const secure = publicUrl.startsWith("https:") ? "; Secure" : "";
  return `${DEVICE_COOKIE}=${value}; Path=${DEVICE_COOKIE_PATH}; HttpOnly; SameSite=Strict; Max-Age=${DEVICE_COOKIE_MS / 1000}${secure}`;
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
