import net from "node:net";

/**
 * A raw HTTP/1.1 connection to `url`'s port on loopback, from `localAddress` (all of 127/8 is loopback, so each
 * address is a client of its own to the per-address limits): for requests a fetch client would not send as
 * written, or sent all at once once every connection is open.
 */
export function connectFrom(url: string, localAddress: string): Promise<net.Socket> {
  return new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect({ host: "127.0.0.1", port: Number(new URL(url).port), localAddress });
    s.once("connect", () => resolve(s));
    s.once("error", reject);
  });
}

/** The status of the first answer on `s` (0 when it closed without one). */
export function statusOn(s: net.Socket): Promise<number> {
  return new Promise<number>((resolve) => {
    let data = "";
    s.on("data", (d) => {
      data += d.toString();
      if (data.includes("\r\n\r\n")) resolve(Number(data.slice(9, 12)));
    });
    s.on("close", () => resolve(Number(data.slice(9, 12)) || 0));
  });
}
