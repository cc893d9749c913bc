import pg from "pg";
import type { Logger } from "../logger.ts";

/** The NOTIFY channel every instance listens on for cache invalidations. */
export const CHANGE_CHANNEL = "partner_api_changes";

/** Topics of {@link ChangeFeed} messages. */
/** `limits`: a partner's limit overrides (the id is the partner's). */
export type ChangeTopic = "api_key" | "signing_keys" | "limits";

type Handler = (id: string) => void;

/**
 * Cross-instance cache invalidation over PostgreSQL LISTEN/NOTIFY. A change is announced with
 * {@link notifySql} inside the transaction that makes it, so the message goes out exactly when the change
 * commits. Caches must only be trusted while `healthy` is true: a lost connection may have lost messages,
 * so on reconnect every subscriber is told to drop everything (`id` "*").
 */
export interface ChangeFeed {
  readonly healthy: boolean;
  subscribe(topic: ChangeTopic, handler: Handler): void;
  /** Delivers a change locally at once (the NOTIFY reaches this instance a moment later too). */
  emitLocal(topic: ChangeTopic, id: string): void;
  close(): Promise<void>;
}

/** SQL (with its parameter) that announces a change; run it inside the changing transaction. */
export function notifySql(topic: ChangeTopic, id: string): { sql: string; params: string[] } {
  return { sql: "select pg_notify(?, ?)", params: [CHANGE_CHANNEL, `${topic}:${id}`] };
}

/** Starts listening. Reconnects with back-off; never throws after start. */
export async function startChangeFeed(databaseUrl: string, logger: Logger): Promise<ChangeFeed> {
  const handlers = new Map<ChangeTopic, Handler[]>();
  let client: pg.Client | undefined;
  let healthy = false;
  let closed = false;
  let retryMs = 100;

  const dispatch = (topic: ChangeTopic, id: string) => {
    for (const h of handlers.get(topic) ?? []) h(id);
  };
  const dropAll = () => {
    for (const topic of handlers.keys()) dispatch(topic, "*");
  };

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: databaseUrl, application_name: "partner-api changes" });
    c.on("notification", (msg) => {
      const payload = msg.payload ?? "";
      const at = payload.indexOf(":");
      if (at > 0) dispatch(payload.slice(0, at) as ChangeTopic, payload.slice(at + 1));
    });
    const lost = (err?: unknown) => {
      if (client !== c) return;
      client = undefined;
      healthy = false;
      dropAll();
      c.end().catch(() => undefined);
      if (closed) return;
      logger.warn("change feed connection lost; caches bypassed until it is back", { err });
      setTimeout(() => void reconnect(), retryMs).unref();
      retryMs = Math.min(retryMs * 2, 5_000);
    };
    c.on("error", lost);
    c.on("end", () => lost());
    await c.connect();
    await c.query(`listen ${CHANGE_CHANNEL}`);
    client = c;
    // Anything cached before this point may have missed a message.
    dropAll();
    healthy = true;
    retryMs = 100;
  };
  const reconnect = async () => {
    if (closed) return;
    try {
      await connect();
      logger.info("change feed reconnected");
    } catch (err) {
      logger.warn("change feed reconnect failed", { err });
      setTimeout(() => void reconnect(), retryMs).unref();
      retryMs = Math.min(retryMs * 2, 5_000);
    }
  };

  await connect();
  return {
    get healthy() {
      return healthy && !closed;
    },
    subscribe(topic, handler) {
      handlers.set(topic, [...(handlers.get(topic) ?? []), handler]);
    },
    emitLocal: dispatch,
    async close() {
      closed = true;
      healthy = false;
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
  };
}
