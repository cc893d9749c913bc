import { promises as dns } from "node:dns";
import type { ResolvedAddress, Resolver } from "./destination.ts";

/** Options for {@link createDnsResolver}. */
export interface DnsResolverOptions {
  /**
   * WEBHOOK_DNS_SERVERS: the name servers to ask (`1.1.1.1`, `[2606:4700::1111]:53`, `127.0.0.1:5300`); empty,
   * the servers of `/etc/resolv.conf`.
   */
  servers: readonly string[];
  /** WEBHOOK_DNS_TIMEOUT_MS: the longest a lookup may take, every try included. */
  timeoutMs: number;
}

/** A lookup that got no answer in time (`ETIMEOUT`, as c-ares names its own). */
export class DnsTimeoutError extends Error {
  override readonly name = "DnsTimeoutError";
  readonly code = "ETIMEOUT";
}

const LOOPBACK: ResolvedAddress[] = [
  { address: "127.0.0.1", family: 4 },
  { address: "::1", family: 6 },
];

/**
 * Resolves partners' webhook host names with DNS queries of the process's own (c-ares), never `getaddrinfo`:
 * a system lookup runs on one of libuv's four worker threads and cannot be cancelled, so four names whose
 * servers never answer would stall every password hash, file read and decompression of the process for as
 * long as the system resolver keeps trying. Here a lookup is a socket read with a deadline: A and AAAA are
 * asked together, each try gets a third of `timeoutMs`, and at `timeoutMs` the answer is `ETIMEOUT` whatever
 * is still outstanding. `localhost` and `*.localhost` are loopback (RFC 6761) without a query; `/etc/hosts`
 * is not read (a partner's URL names a host on the internet).
 */
export function createDnsResolver({ servers, timeoutMs }: DnsResolverOptions): Resolver {
  const resolver = new dns.Resolver({ timeout: Math.max(50, Math.ceil(timeoutMs / 3)), tries: 2 });
  if (servers.length > 0) resolver.setServers([...servers]);
  return async (hostname) => {
    const name = hostname.toLowerCase().replace(/\.$/, "");
    if (name === "localhost" || name.endsWith(".localhost")) return LOOPBACK;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DnsTimeoutError(`${name} did not resolve in time`)), timeoutMs);
    });
    try {
      const [v4, v6] = await Promise.race([
        Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]),
        deadline,
      ]);
      const found: ResolvedAddress[] = [
        ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
        ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
      ];
      if (found.length > 0) return found;
      const failed = [v4, v6].find((r) => r.status === "rejected" && isTimeout(r.reason));
      if (failed?.status === "rejected") throw new DnsTimeoutError(`${name} did not resolve in time`);
      throw v4.status === "rejected" ? v4.reason : new Error(`${name} has no address`);
    } finally {
      clearTimeout(timer);
    }
  };
}

/** True for a lookup that ended for want of an answer, not for an answer that the name does not exist. */
function isTimeout(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return err instanceof DnsTimeoutError || code === "ETIMEOUT" || code === "ECONNREFUSED";
}
