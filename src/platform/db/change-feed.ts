import pg from "pg";
import type { Logger } from "../logger.ts";

/** The NOTIFY channel every instance listens on for cache invalidations. */
export const CHANGE_CHANNEL = "partner_api_changes";

/**
 * Every instance announces itself this often on the channel, and trusts its caches only while some message has
 * arrived within {@link SILENT_MS}: a connection that stopped delivering without an error (a half-open TCP
 * connection, a stalled backend, a proxy that keeps the session) is found within seconds, not left trusted.
 */
const HEARTBEAT_MS = 1_000;
const SILENT_MS = 5_000;
const HEARTBEAT = "heartbeat:";

/** Topics of {@link ChangeFeed} messages. */
/** `limits`: a partner's limit overrides (the id is the partner's). */
/** `listeners`: an instance started or stopped listening (the id is the instance's). */
export type ChangeTopic = "api_key" | "signing_keys" | "limits" | "listeners";

type Handler = (id: string) => void;

/**
 * Cross-instance cache invalidation over PostgreSQL LISTEN/NOTIFY. A change is announced with
 * {@link notifySql} inside the transaction that makes it, so the message goes out exactly when the change
 * commits. Caches must only be trusted while `healthy` is true: a lost connection may have lost messages,
 * so on reconnect every subscriber is told to drop everything (`id` "*"). A connection silent for longer than
 * {@link SILENT_MS} despite the heartbeats counts as lost.
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
  let lastHeard = 0;
  let beating = false;
  let silent: (silentMs: number) => void = () => undefined;

  const dispatch = (topic: ChangeTopic, id: string) => {
    for (const h of handlers.get(topic) ?? []) h(id);
  };
  const dropAll = () => {
    for (const topic of handlers.keys()) dispatch(topic, "*");
  };

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: databaseUrl, application_name: "partner-api changes" });
    c.on("notification", (msg) => {
      if (client === c) lastHeard = Date.now();
      const payload = msg.payload ?? "";
      if (payload === HEARTBEAT) return;
      const at = payload.indexOf(":");
      if (at > 0) dispatch(payload.slice(0, at) as ChangeTopic, payload.slice(at + 1));
    });
    const lost = (err?: unknown) => {
      if (client !== c) return;
      client = undefined;
      healthy = false;
      dropAll();
      c.end().catch(() => undefined);
      // end() waits for the server to close; a stalled one never does, so the socket goes now.
      (c as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
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
    lastHeard = Date.now();
    silent = (silentMs) => lost(new Error(`no message for ${silentMs} ms despite the heartbeats`));
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

  const heartbeat = setInterval(() => {
    const c = client;
    if (!c || closed) return;
    const silentMs = Date.now() - lastHeard;
    if (silentMs > SILENT_MS) return silent(silentMs);
    if (beating) return;
    beating = true;
    c.query("select pg_notify($1, $2)", [CHANGE_CHANNEL, HEARTBEAT])
      .catch(() => undefined)
      .finally(() => {
        beating = false;
      });
  }, HEARTBEAT_MS);
  heartbeat.unref();

  await connect();
  return {
    get healthy() {
      return healthy && !closed && Date.now() - lastHeard <= SILENT_MS;
    },
    subscribe(topic, handler) {
      handlers.set(topic, [...(handlers.get(topic) ?? []), handler]);
    },
    emitLocal: dispatch,
    async close() {
      closed = true;
      clearInterval(heartbeat);
      healthy = false;
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
  };
}
