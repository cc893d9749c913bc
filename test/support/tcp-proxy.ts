import net from "node:net";

/** A TCP proxy in front of PostgreSQL that can make connections go silent, as a broken network does. */
export interface SilencingProxy {
  /** The proxy's address, to put in a `DATABASE_URL` in place of the server's. */
  host: string;
  port: number;
  /**
   * From now on the open connections whose startup message names this `application_name` carry nothing
   * either way, their sockets left open (a half-open connection: no error, no answer). New connections pass.
   */
  silence(applicationName: string): number;
  close(): Promise<void>;
}

/** Starts a proxy on a loopback port that forwards to `target`. */
export async function startSilencingProxy(target: { host: string; port: number }): Promise<SilencingProxy> {
  const open = new Set<{ client: net.Socket; server: net.Socket; app: string; silent: boolean }>();
  const proxy = net.createServer((client) => {
    const server = net.connect(target.port, target.host);
    const link = { client, server, app: "", silent: false };
    open.add(link);
    let first = true;
    client.on("data", (chunk) => {
      if (first) {
        first = false;
        // The startup message lists parameters as NUL-separated names and values.
        const m = /application_name\0([^\0]*)\0/.exec(chunk.toString("latin1"));
        link.app = m?.[1] ?? "";
      }
      if (!link.silent) server.write(chunk);
    });
    server.on("data", (chunk) => {
      if (!link.silent) client.write(chunk);
    });
    const end = () => {
      open.delete(link);
      client.destroy();
      server.destroy();
    };
    client.on("error", end).on("close", end);
    server.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const { port } = proxy.address() as net.AddressInfo;
  return {
    host: "127.0.0.1",
    port,
    silence(applicationName) {
      let n = 0;
      for (const link of open) {
        if (link.app === applicationName && !link.silent) {
          link.silent = true;
          n++;
        }
      }
      return n;
    },
    async close() {
      for (const link of open) {
        link.client.destroy();
        link.server.destroy();
      }
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}
