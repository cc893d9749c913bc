import net from "node:net";

/** A listener's port, and the variable that sets it. */
export interface PortToCheck {
  variable: "PORT" | "INTERNAL_PORT";
  host: string;
  port: number;
}

/**
 * The first configured port another process already holds, tried by binding it for a moment: a busy port is
 * then one clear line at start, before the embedded database and the migrations run, rather than a stack trace
 * after them. (The listeners still bind for real later; this only spares the wait and the noise.)
 */
export async function busyPort(ports: PortToCheck[]): Promise<PortToCheck | undefined> {
  for (const p of ports) {
    if (p.port === 0) continue;
    const busy = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once("error", (err: NodeJS.ErrnoException) =>
        resolve(err.code === "EADDRINUSE" || err.code === "EACCES"),
      );
      server.listen({ host: p.host, port: p.port, exclusive: true }, () =>
        server.close(() => resolve(false)),
      );
    });
    if (busy) return p;
  }
  return undefined;
}
