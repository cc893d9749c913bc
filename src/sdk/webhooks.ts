/**
 * Receiving webhooks: signature verification by the receiver rules of the API, and a store of processed event
 * ids for at-least-once delivery. Runs in Node 20+, browsers and edge runtimes (WebCrypto only).
 *
 * ```ts
 * const event = await constructWebhookEvent({
 *   payload: rawBody,                                   // the raw bytes, not re-serialised JSON
 *   signatureHeader: req.headers["x-service-signature"],
 *   secret: process.env.WEBHOOK_SECRET,                 // whsec_…; pass both during a rotation
 * });                                                   // throws WebhookVerificationError: answer 401
 * if (await store.has(event.id)) return 200;            // a duplicate: already handled
 * await handle(event);
 * await store.add(event.id);
 * ```
 */

/** A delivery whose `t` differs from the receiver's clock by more than this many seconds is rejected (replays). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** Why a delivery was rejected. */
export type WebhookVerificationErrorCode =
  | "missing_signature"
  | "malformed_signature"
  | "timestamp_outside_tolerance"
  | "signature_mismatch"
  | "invalid_payload";

/** A delivery that must not be processed; answer 401 and log it. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
  readonly code: WebhookVerificationErrorCode;
  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** The event envelope every delivery carries. */
export interface WebhookEvent<P = Record<string, unknown>> {
  /** `evt_…`, the same on every delivery of the event: dedupe on it. */
  id: string;
  type: string;
  /** ISO-8601; use it when order matters (delivery order is not guaranteed). */
  createdAt: string;
  payload: P;
  /** True for synthetic test deliveries. */
  test?: boolean;
}

/** What {@link verifyWebhookSignature} needs. */
export interface VerifyOptions {
  /** The raw request body, exactly as received. */
  payload: string | Uint8Array;
  /** The `X-Service-Signature` header. */
  signatureHeader: string | readonly string[] | null | undefined;
  /** The subscription secret (`whsec_…`), or several during a rotation. */
  secret: string | readonly string[];
  /** Allowed clock difference in seconds; 300 by default. */
  toleranceSeconds?: number;
  /** The receiver's clock in milliseconds; `Date.now` by default. */
  now?: () => number;
}

const encoder = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  let out = "";
  for (const b of new Uint8Array(bytes)) out += b.toString(16).padStart(2, "0");
  return out;
}

/** Equality that takes the same time wherever the strings differ. */
function timingSafeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

async function hmacHex(secret: string, message: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return hex(await crypto.subtle.sign("HMAC", key, message as Uint8Array<ArrayBuffer>));
}

/** Parses `t=…,v1=…[,v1=…]`. Unknown schemes are ignored, so a future `v2` does not break this verifier. */
export function parseSignatureHeader(header: string): { timestamp: number; signatures: string[] } {
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    if (at <= 0) continue;
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === "t" && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === "v1" && /^[0-9a-f]{64}$/i.test(value)) signatures.push(value.toLowerCase());
  }
  if (timestamp === undefined || signatures.length === 0) {
    throw new WebhookVerificationError("malformed_signature", "X-Service-Signature has no t= and v1= values");
  }
  return { timestamp, signatures };
}

/**
 * Verifies a delivery (the receiver rules of the API): parses `t` and every `v1`, rejects a `t` more than the
 * tolerance away from the receiver's clock, computes HMAC-SHA256 over `<t>.<raw body>` with each secret,
 * and accepts when any `v1` matches, comparing in constant time. Throws {@link WebhookVerificationError}.
 */
export async function verifyWebhookSignature(options: VerifyOptions): Promise<void> {
  const raw = Array.isArray(options.signatureHeader) ? options.signatureHeader[0] : options.signatureHeader;
  if (typeof raw !== "string" || raw === "") {
    throw new WebhookVerificationError("missing_signature", "no X-Service-Signature header");
  }
  const { timestamp, signatures } = parseSignatureHeader(raw);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now ?? Date.now)() / 1000);
  if (Math.abs(nowSeconds - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      "timestamp_outside_tolerance",
      `signature timestamp is ${nowSeconds - timestamp} s from this receiver's clock (tolerance ${tolerance} s)`,
    );
  }
  const body = typeof options.payload === "string" ? encoder.encode(options.payload) : options.payload;
  const message = new Uint8Array(String(timestamp).length + 1 + body.length);
  message.set(encoder.encode(`${timestamp}.`), 0);
  message.set(body, String(timestamp).length + 1);
  const secrets = typeof options.secret === "string" ? [options.secret] : options.secret;
  if (secrets.length === 0) throw new Error("verifyWebhookSignature needs at least one secret");
  let matched = false;
  for (const secret of secrets) {
    const expected = await hmacHex(secret, message);
    // Every candidate is compared (no early exit), so timing says nothing about which one matched.
    for (const candidate of signatures) matched = timingSafeEqual(expected, candidate) || matched;
  }
  if (!matched)
    throw new WebhookVerificationError("signature_mismatch", "no v1 signature matches the secret");
}

/** Verifies a delivery and returns its event, parsed from the verified raw body. */
export async function constructWebhookEvent<P = Record<string, unknown>>(
  options: VerifyOptions,
): Promise<WebhookEvent<P>> {
  await verifyWebhookSignature(options);
  const text =
    typeof options.payload === "string" ? options.payload : new TextDecoder().decode(options.payload);
  let event: WebhookEvent<P>;
  try {
    event = JSON.parse(text) as WebhookEvent<P>;
  } catch {
    throw new WebhookVerificationError("invalid_payload", "the body is not JSON");
  }
  if (typeof event?.id !== "string" || typeof event.type !== "string") {
    throw new WebhookVerificationError("invalid_payload", "the body is not an event envelope");
  }
  return event;
}

/** Processed event ids are kept for 30 days, longer than the service retries a delivery (14 days). */
export const PROCESSED_RETENTION_DAYS = 30;

/**
 * Event ids already processed, so a duplicate delivery is answered 200 without processing it again. Mark
 * an id only after processing succeeded; a receiver that must never process twice does both in one
 * database transaction (see {@link PostgresProcessedEventStore}).
 */
export interface ProcessedEventStore {
  has(eventId: string): Promise<boolean>;
  add(eventId: string): Promise<void>;
}

/** An in-memory store with 30-day retention, for one process. */
export class InMemoryProcessedEventStore implements ProcessedEventStore {
  readonly #seen = new Map<string, number>();
  readonly #retentionMs: number;
  readonly #now: () => number;

  constructor(options: { retentionDays?: number; now?: () => number } = {}) {
    this.#retentionMs = (options.retentionDays ?? PROCESSED_RETENTION_DAYS) * 86_400_000;
    this.#now = options.now ?? Date.now;
  }

  async has(eventId: string): Promise<boolean> {
    const at = this.#seen.get(eventId);
    if (at === undefined) return false;
    if (this.#now() - at > this.#retentionMs) {
      this.#seen.delete(eventId);
      return false;
    }
    return true;
  }

  async add(eventId: string): Promise<void> {
    const now = this.#now();
    this.#seen.set(eventId, now);
    // Forget what is past retention, a little at a time.
    for (const [id, at] of this.#seen) {
      if (now - at <= this.#retentionMs) break;
      this.#seen.delete(id);
    }
  }
}

/** Runs one SQL statement with `$1`-style parameters: `pg`'s `client.query` or `pool.query` fit. */
export type SqlQuery = (text: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

const TABLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A PostgreSQL store shared by every instance of the receiver. `add` can run on the same client as the
 * receiver's own writes, inside its transaction, so processing and marking commit together.
 */
export class PostgresProcessedEventStore implements ProcessedEventStore {
  readonly #query: SqlQuery;
  readonly #table: string;
  readonly #retentionDays: number;

  constructor(query: SqlQuery, options: { table?: string; retentionDays?: number } = {}) {
    const table = options.table ?? "processed_webhook_events";
    if (!TABLE_NAME.test(table)) throw new Error(`invalid table name ${table}`);
    this.#query = query;
    this.#table = table;
    this.#retentionDays = options.retentionDays ?? PROCESSED_RETENTION_DAYS;
  }

  /** Creates the table if it is missing. */
  async ensureSchema(): Promise<void> {
    await this.#query(
      `create table if not exists ${this.#table} (event_id text primary key, processed_at timestamptz not null default now())`,
    );
  }

  async has(eventId: string): Promise<boolean> {
    const { rows } = await this.#query(
      `select 1 from ${this.#table} where event_id = $1 and processed_at > now() - make_interval(days => $2)`,
      [eventId, this.#retentionDays],
    );
    return rows.length > 0;
  }

  /** Marks an id processed; pass the client of your transaction to commit it with your own writes. */
  async add(eventId: string, query: SqlQuery = this.#query): Promise<void> {
    await query(
      `insert into ${this.#table} (event_id) values ($1)
       on conflict (event_id) do update set processed_at = excluded.processed_at`,
      [eventId],
    );
  }

  /** Deletes ids past retention; run it daily. Returns how many were deleted. */
  async purge(): Promise<number> {
    const { rows } = await this.#query(
      `delete from ${this.#table} where processed_at < now() - make_interval(days => $1) returning event_id`,
      [this.#retentionDays],
    );
    return rows.length;
  }
}
