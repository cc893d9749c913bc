import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { createContext } from "preact";

/** The two environments a person may switch between; the header the edge reads it from. */
export type Environment = "sandbox" | "production";
export const ENVIRONMENT_HEADER = "x-portal-environment";

const STORAGE_KEY = "portal.environment";

/** The environment last chosen in this tab (sandbox until a person picks production). */
export function storedEnvironment(): Environment {
  return sessionStorage.getItem(STORAGE_KEY) === "production" ? "production" : "sandbox";
}

/** Remembers the choice for this tab only: a new tab starts in the sandbox, never in production by surprise. */
export function storeEnvironment(env: Environment): void {
  sessionStorage.setItem(STORAGE_KEY, env);
}

/**
 * The portal's transport to the partner API: the same Connect methods a partner's code calls, on the same
 * origin, with the session cookie in place of an API key and the chosen environment in a header. Each
 * environment gets its own transport, so no cached answer of one is ever shown under the other.
 */
export function portalTransport(env: Environment): Transport {
  const withEnvironment: Interceptor = (next) => (req) => {
    req.header.set(ENVIRONMENT_HEADER, env);
    return next(req);
  };
  return createConnectTransport({
    baseUrl: location.origin,
    interceptors: [withEnvironment],
    // Cookies go with same-origin requests; never to anyone else.
    fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
  });
}

/** The environment the portal shows, for pages that offer something in one only (the sandbox's tools). */
export const EnvironmentContext = createContext<Environment>("sandbox");

/**
 * Whether the member may write (a developer or an admin): a viewer is offered no action the API would refuse
 * them (`403 permission_denied`).
 */
export const CanWriteContext = createContext<boolean>(false);
