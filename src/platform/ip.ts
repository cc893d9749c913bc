import { isIP } from "node:net";

/** The 16 bytes of an IPv6 address (`isIP` already said it is one), dotted IPv4 tail included. */
export function ipv6Bytes(ip: string): number[] {
  let text = ip.toLowerCase().split("%")[0] ?? "";
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const groups = (part: string) => (part ? part.split(":").map((g) => Number.parseInt(g, 16)) : []);
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = [...h, ...Array(8 - h.length - t.length).fill(0), ...t] as number[];
  return all.flatMap((g) => [g >> 8, g & 255]);
}

/**
 * The key a client is counted under by every per-address limit (connections, failed authentications,
 * sign-in guesses): an IPv4 address as it is (also when it arrives IPv4-mapped, `::ffff:a.b.c.d`), and an
 * IPv6 address by its /64, the smallest block a network hands one subscriber, so that a client cannot
 * escape a limit by walking the 2^64 addresses of its own prefix. Anything else is kept as given.
 */
export function addressKey(address: string): string {
  const family = isIP(address);
  if (family !== 6) return address;
  const b = ipv6Bytes(address);
  if (b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) return b.slice(12).join(".");
  const groups: string[] = [];
  for (let i = 0; i < 8; i += 2) groups.push((((b[i] ?? 0) << 8) | (b[i + 1] ?? 0)).toString(16));
  return `${groups.join(":")}::/64`;
}
