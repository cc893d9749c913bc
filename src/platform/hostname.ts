import { isIP } from "node:net";

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * True for the host of a URL the WHATWG parser already read (lower case, IDNs as punycode) when it is a host
 * name of letters, digits and hyphens in dot-separated labels (RFC 1123), an IPv4 address, or a bracketed
 * IPv6 address. The parser itself accepts `;`, `"`, `,`, `*` and `_` in hosts, which would carry into a
 * header built from the URL (a Content-Security-Policy source list) as syntax of that header.
 */
export function isHostName(host: string): boolean {
  if (host.startsWith("[") && host.endsWith("]")) return isIP(host.slice(1, -1)) === 6;
  if (isIP(host) === 4) return true;
  if (host.length === 0 || host.length > 253) return false;
  return host.split(".").every((label) => LABEL.test(label));
}
