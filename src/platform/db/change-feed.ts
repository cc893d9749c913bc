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

/** Subscribers by topic, told of each change to their topic, or of everything dropped (`id` "*"). */
class Subscribers {
  readonly #handlers = new Map<ChangeTopic, Handler[]>();

  add(topic: ChangeTopic, handler: Handler): void {
    this.#handlers.set(topic, [...(this.#handlers.get(topic) ?? []), handler]);
  }

  dispatch(topic: ChangeTopic, id: string): void {
    for (const h of this.#handlers.get(topic) ?? []) h(id);
  }

  /** Tells every subscriber to drop everything: messages may have been missed. */
  dropAll(): void {
    for (const topic of this.#handlers.keys()) this.dispatch(topic, "*");
  }
}

/**
 * The LISTEN connection and its health. One connection at a time: a lost one (an error, its end, or silence
 * past {@link SILENT_MS}) is dropped and replaced with back-off, and the subscribers are told to drop
 * everything both when it is lost and once its successor listens.
 */
class ListeningConnection implements ChangeFeed {
  readonly #subscribers = new Subscribers();
  #client: pg.Client | undefined;
  #healthy = false;
  #closed = false;
  #retryMs = 100;
  #lastHeard = 0;
  #beating = false;
  readonly #heartbeat: NodeJS.Timeout;
  readonly #databaseUrl: string;
  readonly #logger: Logger;

  constructor(databaseUrl: string, logger: Logger) {
    this.#databaseUrl = databaseUrl;
    this.#logger = logger;
    this.#heartbeat = setInterval(() => this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  get healthy(): boolean {
    return this.#healthy && !this.#closed && Date.now() - this.#lastHeard <= SILENT_MS;
  }

  subscribe(topic: ChangeTopic, handler: Handler): void {
    this.#subscribers.add(topic, handler);
  }

  readonly emitLocal = (topic: ChangeTopic, id: string): void => this.#subscribers.dispatch(topic, id);

  async connect(): Promise<void> {
    const c = new pg.Client({ connectionString: this.#databaseUrl, application_name: "partner-api changes" });
    c.on("notification", (msg) => {
      if (this.#client === c) this.#lastHeard = Date.now();
      const payload = msg.payload ?? "";
      if (payload === HEARTBEAT) return;
      const at = payload.indexOf(":");
      if (at > 0) this.#subscribers.dispatch(payload.slice(0, at) as ChangeTopic, payload.slice(at + 1));
    });
    c.on("error", (err) => this.#lost(c, err));
    c.on("end", () => this.#lost(c));
    await c.connect();
    await c.query(`listen ${CHANGE_CHANNEL}`);
    this.#client = c;
    this.#lastHeard = Date.now();
    // Anything cached before this point may have missed a message.
    this.#subscribers.dropAll();
    this.#healthy = true;
    this.#retryMs = 100;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    this.#healthy = false;
    const c = this.#client;
    this.#client = undefined;
    await c?.end().catch(() => undefined);
  }

  /** A connection failed, ended or fell silent: caches are bypassed until another one listens. */
  #lost(c: pg.Client, err?: unknown): void {
    if (this.#client !== c) return;
    this.#client = undefined;
    this.#healthy = false;
    this.#subscribers.dropAll();
    c.end().catch(() => undefined);
    // end() waits for the server to close; a stalled one never does, so the socket goes now.
    // pg keeps the socket on an untyped `connection` (library interop).
    (c as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    if (this.#closed) return;
    this.#logger.warn("change feed connection lost; caches bypassed until it is back", { err });
    this.#retryLater();
  }

  async #reconnect(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.connect();
      this.#logger.info("change feed reconnected");
    } catch (err) {
      this.#logger.warn("change feed reconnect failed", { err });
      this.#retryLater();
    }
  }

  #retryLater(): void {
    setTimeout(() => void this.#reconnect(), this.#retryMs).unref();
    this.#retryMs = Math.min(this.#retryMs * 2, 5_000);
  }

  /** Sends this instance's heartbeat, or gives the connection up when nothing has arrived for too long. */
  #beat(): void {
    const c = this.#client;
    if (!c || this.#closed) return;
    const silentMs = Date.now() - this.#lastHeard;
    if (silentMs > SILENT_MS) {
      this.#lost(c, new Error(`no message for ${silentMs} ms despite the heartbeats`));
      return;
    }
    if (this.#beating) return;
    this.#beating = true;
    c.query("select pg_notify($1, $2)", [CHANGE_CHANNEL, HEARTBEAT])
      .catch(() => undefined)
      .finally(() => {
        this.#beating = false;
      });
  }
}

/** Starts listening. Reconnects with back-off; never throws after start. */
export async function startChangeFeed(databaseUrl: string, logger: Logger): Promise<ChangeFeed> {
  const feed = new ListeningConnection(databaseUrl, logger);
  await feed.connect();
  return feed;
}
