import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Secret, TOTP } from "otpauth";
import { PortalAdminService } from "../../gen/internal/v1/portal_admin_pb.ts";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import type { Clock } from "../../src/platform/clock.ts";
import { internalClient, type TestApp } from "./app.ts";

/**
 * A browser as the portal sees it: its cookie jar (the session cookie, and the device cookie sent only where
 * its path says), its origin, its selected environment.
 */
export interface Browser {
  /** `portal_session=…`, as sent. */
  cookie: string | undefined;
  /** `portal_device=…`, as sent to its path. */
  device: string | undefined;
  /** The device cookie's `Path`. */
  devicePath: string;
  origin: string | undefined;
  environment: string | undefined;
  /** Extra headers every call sends. */
  headers: Record<string, string>;
  client<S extends DescService>(service: S): Client<S>;
}

/** A Connect client (JSON) that keeps the session cookie the service sets, as a browser on the page would. */
export function browser(baseUrl: string, environment = "sandbox"): Browser {
  const b: Browser = {
    cookie: undefined,
    device: undefined,
    devicePath: "/",
    origin: baseUrl,
    environment,
    headers: {},
    client: (service) =>
      createClient(
        service,
        createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [jar], useBinaryFormat: false }),
      ),
  };
  const keep = (h: Headers) => {
    for (const set of h.getSetCookie()) {
      const [pair = "", ...attributes] = set.split(";").map((part) => part.trim());
      const name = pair.slice(0, pair.indexOf("="));
      const value = pair.slice(pair.indexOf("=") + 1);
      if (name === "portal_session") b.cookie = value ? `portal_session=${value}` : undefined;
      if (name === "portal_device") {
        b.device = value ? `portal_device=${value}` : undefined;
        b.devicePath = attributes.find((a) => a.startsWith("Path="))?.slice(5) ?? "/";
      }
    }
  };
  const jar: Interceptor = (next) => async (req) => {
    const path = new URL(req.url).pathname;
    const cookies = [b.cookie, path.startsWith(b.devicePath) ? b.device : undefined].filter(Boolean);
    if (cookies.length > 0) req.header.set("cookie", cookies.join("; "));
    if (b.origin) req.header.set("origin", b.origin);
    if (b.environment) req.header.set("x-portal-environment", b.environment);
    for (const [k, v] of Object.entries(b.headers)) req.header.set(k, v);
    try {
      const res = await next(req);
      keep(res.header);
      return res;
    } catch (err) {
      const meta = (err as { metadata?: Headers }).metadata;
      if (meta) keep(meta);
      throw err;
    }
  };
  return b;
}

/** The current TOTP code of `secret` at the clock's now. */
export function totpCode(secret: string, clock: Clock): string {
  return new TOTP({ secret: Secret.fromBase32(secret), digits: 6, period: 30, algorithm: "SHA1" }).generate({
    timestamp: clock.now().getTime(),
  });
}

/** The operator's portal client on the internal API. */
export const portalAdmin = (t: TestApp) => internalClient(PortalAdminService, t.internalUrl, t.internalToken);

/** A member made the whole way: invited by the operator, password set, TOTP enrolled; signed in. */
export interface MemberFixture {
  id: string;
  email: string;
  password: string;
  secret: string;
  recoveryCodes: string[];
  browser: Browser;
}

/** The token of an invite URL (after `#`). */
export const tokenOf = (url: string) => url.slice(url.indexOf("#") + 1);

/** Enrols the holder of an invite URL; `clock` is the app's (TOTP codes are computed at its now). */
export async function enrol(
  t: TestApp,
  clock: Clock,
  inviteUrl: string,
  email: string,
  password = `correct horse ${Math.random().toString(36).slice(2)}`,
): Promise<MemberFixture> {
  const b = browser(t.partnerUrl);
  const auth = b.client(PortalAuthService);
  const token = tokenOf(inviteUrl);
  const { secret } = await auth.acceptInvite({ token, password });
  const done = await auth.confirmEnrolment({ token, code: totpCode(secret, clock) });
  return {
    id: done.member?.id ?? "",
    email,
    password,
    secret,
    recoveryCodes: done.recoveryCodes,
    browser: b,
  };
}

/** Invites `email` to `partnerId` as the operator and enrols them. */
export async function member(
  t: TestApp,
  clock: Clock,
  partnerId: string,
  role: "admin" | "developer" | "viewer",
  email = `${role}-${Math.random().toString(36).slice(2)}@example.com`,
): Promise<MemberFixture> {
  const { inviteUrl } = await portalAdmin(t).inviteMember({ partnerId, email, role });
  return enrol(t, clock, inviteUrl, email);
}

/**
 * Hashes portal passwords at OWASP's cost until disposed (`using _ = productionPasswordCost()`), for the tests
 * whose point is what real hashes cost; the suite's default is cheaper (test/README.md).
 */
export function productionPasswordCost(): Disposable {
  const before = process.env.TEST_PASSWORD_HASH_LOG_N;
  delete process.env.TEST_PASSWORD_HASH_LOG_N;
  return {
    [Symbol.dispose]: () => {
      if (before !== undefined) process.env.TEST_PASSWORD_HASH_LOG_N = before;
    },
  };
}
