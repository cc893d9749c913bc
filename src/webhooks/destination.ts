import { BlockList, isIP } from "node:net";
import { ipv6Bytes } from "../platform/ip.ts";
import { networkStarting } from "../platform/network-guard.ts";
import type { Environment } from "../platform/tenancy.ts";

/** A resolved address. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves a host name to every address it has, within its own deadline (`createDnsResolver`); injectable so
 * tests can play DNS. A lookup that got no answer in time rejects with an error whose `code` is `ETIMEOUT`.
 */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** Where webhooks may go. */
export interface DestinationPolicy {
  /**
   * Local development (`ALLOW_LOCAL_WEBHOOKS`; unset, on with the embedded PostgreSQL and off with
   * `DATABASE_URL`): http and loopback destinations allowed for sandbox subscriptions only, and never a port
   * this process listens on.
   */
  allowLocal: boolean;
  /**
   * Tests only, never set by configuration: with `allowLocal`, production subscriptions get the local rules
   * too (for tests whose point is production delivery: provider payouts, the environments' own lanes).
   */
  allowLocalInProduction?: boolean;
  resolver: Resolver;
  /**
   * The ports this process's own listeners are bound to (the partner and internal APIs, and a PostgreSQL on
   * loopback), filled in once they are: a loopback destination on one of them is refused even when local
   * destinations are allowed, so a partner cannot make the service call itself (the internal API, /metrics)
   * and read the answer back.
   */
  ownPorts?: Set<number>;
  /**
   * The ports every instance on this database listens on (they record them at start-up): with local
   * destinations allowed, a loopback one on any of them is refused too, so a sibling instance's internal API
   * on the same host is as far out of reach as this one's. Asked only for an allowed loopback address.
   */
  instancePorts?: () => Promise<ReadonlySet<number>>;
}

/**
 * Whether local destinations (http, loopback) are allowed for a subscription of this environment: only with
 * the switch, and only in sandbox. A caller that does not say which environment gets the switch alone.
 */
export function localAllowed(policy: DestinationPolicy, environment?: Environment): boolean {
  if (!policy.allowLocal) return false;
  return environment !== "production" || policy.allowLocalInProduction === true;
}

/** The port a URL connects to. */
export const portOf = (url: URL): number => Number(url.port || (url.protocol === "https:" ? 443 : 80));

/** Why a destination is refused. */
export type DestinationProblem = "destination_not_allowed" | "dns_error";

/** A refused destination; `problem` is recorded on the delivery attempt. */
export class DestinationError extends Error {
  override readonly name = "DestinationError";
  readonly problem: DestinationProblem;
  constructor(problem: DestinationProblem, message: string, options?: ErrorOptions) {
    super(message, options);
    this.problem = problem;
  }
}

// Never a webhook destination: private, loopback, link-local, CGNAT, multicast, documentation, reserved.
const forbidden = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  forbidden.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["100::", 64],
  ["2001:db8::", 32],
  ["2001::", 23],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  forbidden.addSubnet(net, prefix, "ipv6");
}
const loopback = new BlockList();
loopback.addSubnet("127.0.0.0", 8, "ipv4");
loopback.addAddress("::1", "ipv6");

/**
 * The IPv4 address carried inside an IPv6 address, in every embedding a packet could be routed by:
 * IPv4-compatible (`::/96`, so `[::7f00:1]`), IPv4-mapped (`::ffff:0:0/96`), IPv4-translated
 * (`::ffff:0:0:0/96`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`). Local-use NAT64 (`64:ff9b:1::/48`)
 * can carry IPv4 anywhere, so it is refused whole (see {@link addressAllowed}).
 */
function embeddedIPv4(ip: string): string | undefined {
  const b = ipv6Bytes(ip);
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = (at: number) => b.slice(at, at + 4).join(".");
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12); // ::ffff:a.b.c.d
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12)) return v4(12); // ::ffff:0:a.b.c.d
  // ::a.b.c.d; `::` and `::1` stay IPv6 (unspecified, loopback).
  if (zero(0, 12) && !(zero(12, 15) && (b[15] ?? 0) <= 1)) return v4(12);
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return v4(12); // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2); // 2002:aabb:ccdd::/48
  return undefined;
}

/** IPv6 global unicast is 2000::/3; local-use NAT64 hides an IPv4 address anywhere in it. */
function globalIPv6(ip: string): boolean {
  const b = ipv6Bytes(ip);
  const first = b[0] ?? 0;
  const localNat64 =
    first === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b[4] === 0 && b[5] === 1;
  return (first & 0xe0) === 0x20 && !localNat64;
}

/** True when a webhook may be sent to this IP address under the policy. */
export function addressAllowed(ip: string, allowLocal: boolean): boolean {
  const family = isIP(ip);
  if (family === 0) return false;
  const v4 = family === 6 ? embeddedIPv4(ip) : ip;
  const [addr, type] = v4 ? [v4, "ipv4" as const] : [ip, "ipv6" as const];
  if (allowLocal && loopback.check(addr, type)) return true;
  if (type === "ipv6" && !globalIPv6(addr)) return false;
  return !forbidden.check(addr, type);
}

/** Parses and checks the form of a destination URL; the address is checked separately, at every send. */
export function parseDestination(raw: string, allowLocal: boolean): URL {
  if (raw.length > 2048)
    throw new DestinationError("destination_not_allowed", "the URL is longer than 2048 characters");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new DestinationError("destination_not_allowed", "not an absolute URL");
  }
  if (url.protocol !== "https:" && !(allowLocal && url.protocol === "http:")) {
    throw new DestinationError("destination_not_allowed", "webhook URLs must use https");
  }
  if (url.username || url.password) {
    throw new DestinationError("destination_not_allowed", "webhook URLs may not carry credentials");
  }

  if (/[\s\r\n]/.test(raw))
    throw new DestinationError("destination_not_allowed", "the URL contains white space");
  return url;
}

/**
 * Resolves the host and checks every address it has; a host with any forbidden address is refused
 * outright (so DNS rebinding between the check and the connection gains nothing). Loopback is allowed only
 * under {@link localAllowed} for the subscription's environment, and never on a port of this service's own.
 * Returns the address to connect to, which the caller pins for the connection. Messages name the host as
 * the partner wrote it, never what it resolved to.
 */
export async function vetHost(
  hostname: string,
  policy: DestinationPolicy,
  port?: number,
  environment?: Environment,
): Promise<ResolvedAddress> {
  const host = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  let addresses: ResolvedAddress[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) === 6 ? 6 : 4 }];
  } else {
    networkStarting("dns", host);
    try {
      addresses = await policy.resolver(host);
    } catch (err) {
      const code = (err as { code?: string } | undefined)?.code;
      const why =
        code === "ETIMEOUT" || code === "ECONNREFUSED" ? "did not resolve in time" : "does not resolve";
      throw new DestinationError("dns_error", `${host} ${why}`, { cause: err });
    }
  }
  if (addresses.length === 0) throw new DestinationError("dns_error", `${host} does not resolve`);
  const local = localAllowed(policy, environment);
  const own = (a: ResolvedAddress) =>
    port !== undefined && policy.ownPorts?.has(port) === true && !addressAllowed(a.address, false);
  if (addresses.some((a) => !addressAllowed(a.address, local))) {
    // What the name resolved to is not said: it would map the service's own network for a partner.
    throw new DestinationError(
      "destination_not_allowed",
      `${host} is not a public address, so it is not allowed`,
    );
  }
  const loopbackLocal =
    local && port !== undefined && addresses.some((a) => !addressAllowed(a.address, false));
  if (addresses.some(own) || (loopbackLocal && (await policy.instancePorts?.())?.has(port as number))) {
    throw new DestinationError(
      "destination_not_allowed",
      `${host} on port ${port} is a listener of this service, so it is not allowed`,
    );
  }
  return addresses[0] as ResolvedAddress;
}
