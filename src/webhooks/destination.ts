import { promises as dns } from "node:dns";
import { BlockList, isIP } from "node:net";

/** A resolved address. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has; injectable so tests can play DNS. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver, every address. */
export const systemResolver: Resolver = async (hostname) =>
  (await dns.lookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/** Where webhooks may go. */
export interface DestinationPolicy {
  /** Local development: http and loopback destinations allowed. Off in production. */
  allowLocal: boolean;
  resolver: Resolver;
}

/** Why a destination is refused. */
export type DestinationProblem = "destination_not_allowed" | "dns_error";

/** A refused destination; `problem` is recorded on the delivery attempt. */
export class DestinationError extends Error {
  override readonly name = "DestinationError";
  readonly problem: DestinationProblem;
  constructor(problem: DestinationProblem, message: string) {
    super(message);
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

/** The IPv4 address inside an IPv4-mapped, IPv4-compatible or NAT64 IPv6 address, if any. */
function embeddedIPv4(ip: string): string | undefined {
  const lower = ip.toLowerCase();
  const m = /^(?:::ffff:|::ffff:0:|64:ff9b::|::)((?:\d{1,3}\.){3}\d{1,3})$/.exec(lower);
  if (m) return m[1];
  // Hex forms: ::ffff:a00:1 and 64:ff9b::a00:1.
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = Number.parseInt(hex[1] as string, 16);
    const lo = Number.parseInt(hex[2] as string, 16);
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
  }
  return undefined;
}

/** True when a webhook may be sent to this IP address under the policy. */
export function addressAllowed(ip: string, allowLocal: boolean): boolean {
  const family = isIP(ip);
  if (family === 0) return false;
  const v4 = family === 6 ? embeddedIPv4(ip) : ip;
  const [addr, type] = v4 ? [v4, "ipv4" as const] : [ip, "ipv6" as const];
  if (allowLocal && loopback.check(addr, type)) return true;
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
 * outright (so DNS rebinding between the check and the connection gains nothing). Returns the address to
 * connect to, which the caller pins for the connection.
 */
export async function vetHost(hostname: string, policy: DestinationPolicy): Promise<ResolvedAddress> {
  const host = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  let addresses: ResolvedAddress[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await policy.resolver(host);
    } catch (err) {
      throw new DestinationError(
        "dns_error",
        `${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      );
    }
  }
  if (addresses.length === 0) throw new DestinationError("dns_error", `${host} has no addresses`);
  const bad = addresses.find((a) => !addressAllowed(a.address, policy.allowLocal));
  if (bad) {
    throw new DestinationError(
      "destination_not_allowed",
      `${host} resolves to ${bad.address}, a private or reserved address`,
    );
  }
  return addresses[0] as ResolvedAddress;
}
