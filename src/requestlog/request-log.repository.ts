import type { JsonObject } from "@bufbuild/protobuf";
import { decodeTime, encodeTime } from "ulid";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import {
  dayStart,
  dropPartition,
  ensurePartitions,
  listPartitions,
  type PartitionedTable,
} from "../platform/db/partitions.ts";
import { sql } from "../platform/db/sql.ts";
import type { Tenant } from "../platform/tenancy.ts";

/** The log's daily partitions by `req_` id (docs/operations.md "Partitions"). */
export const REQUEST_LOG: PartitionedTable = { table: "request_log", prefix: "req", period: "day" };

/** How long calls are kept and listed. */
export const REQUEST_LOG_DAYS = 30;
/** Days after today that always have their partitions (the housekeeping runs hourly, and each `api` at start). */
export const DAYS_AHEAD = 3;
/** How many calls a page with a route or key filter looks at, at most: its cost stays bounded at any size. */
export const SCAN_WINDOW = 5_000;

/** One call as the writer keeps it until its batch is written. */
export interface LoggedCall {
  id: string;
  partnerId: string;
  environment: string;
  apiKeyId: string;
  method: string;
  route: string;
  face: string;
  status: number;
  errorCode: string | null;
  durationUs: number;
  /** The error body as JSON text, for a failed call. */
  error: string | null;
}

/** A row as listed. */
export interface LoggedRow {
  id: string;
  api_key_id: string;
  method: string;
  route: string;
  face: string;
  status: number;
  error_code: string | null;
  duration_us: number;
  error: JsonObject | null;
}

/** What a page is filtered by. */
export interface RequestFilter {
  /** Inclusive bounds on the status (`[400, 599]` for failed calls). */
  status?: [number, number];
  errorCode?: string;
  route?: string;
  apiKeyId?: string;
}

/** The smallest `req_` id of calls made at or after `t`. */
export const firstIdAt = (t: Date): string => `req_${encodeTime(t.getTime(), 10)}`;

/** Above every `req_` id (a ULID's first character is at most 7). */
const NEWEST = `req_${"Z".repeat(26)}`;
const COLUMNS = "id, api_key_id, method, route, face, status, error_code, duration_us, error";

/** The request log's table: written in batches, read a page at a time within one tenant. */
export const requestLogRepository = {
  /**
   * Writes a batch in one statement (arrays unnested), committed without waiting for the WAL flush: a crash
   * may lose the last fraction of a second of log, never slow a call. A batch whose day has no partition fails
   * whole (the writer counts it dropped).
   */
  async insert(em: Em, calls: readonly LoggedCall[]): Promise<void> {
    const col = <K extends keyof LoggedCall>(k: K) => calls.map((c) => c[k]);
    await sql(
      em,
      `insert into request_log (id, partner_id, environment, api_key_id, method, route, face, status, error_code,
                                duration_us, error)
       select u.*
         from set_config('synchronous_commit', 'off', true),
              unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::smallint[], $9::text[], $10::integer[], $11::jsonb[]) u`,
      [
        col("id"),
        col("partnerId"),
        col("environment"),
        col("apiKeyId"),
        col("method"),
        col("route"),
        col("face"),
        col("status"),
        col("errorCode"),
        col("durationUs"),
        // jsonb takes no NUL (`\u0000`): one in an error's text would fail the whole batch, other partners' calls
        // with it. It is stored as U+FFFD.
        calls.map((c) => c.error?.replace(NUL_ESCAPE, "$1\\ufffd") ?? null),
      ],
    );
  },

  /**
   * A page of the tenant's calls from `after` (exclusive; the newest when unset) back to `since`, newest first:
   * `limit + 1` rows at most, so the caller can tell whether more remain. A route or key filter is applied to
   * the next {@link SCAN_WINDOW} calls only; when those were all looked at, `scannedTo` is the last of them (older
   * calls remain to be looked at, from there).
   */
  async page(
    em: Em,
    tenant: Tenant,
    f: RequestFilter,
    o: { after: string | undefined; since: string; limit: number },
  ): Promise<{ rows: LoggedRow[]; scannedTo: string | undefined }> {
    const params: unknown[] = [tenant.partnerId, tenant.environment, o.since, o.after ?? NEWEST];
    const failedOnly = f.status !== undefined && f.status[0] >= 400;
    const range = `partner_id = $1 and environment = $2 and id >= $3 and id < $4${failedOnly ? " and status >= 400" : ""}`;
    const conditions: string[] = [];
    if (f.status) {
      params.push(f.status[0], f.status[1]);
      conditions.push(`status between $${params.length - 1} and $${params.length}`);
    }
    if (f.errorCode) {
      params.push(f.errorCode);
      conditions.push(`error_code = $${params.length}`);
    }
    const windowed = f.route !== undefined || f.apiKeyId !== undefined;
    if (f.route !== undefined) {
      params.push(f.route);
      conditions.push(`route = $${params.length}`);
    }
    if (f.apiKeyId !== undefined) {
      params.push(f.apiKeyId);
      conditions.push(`api_key_id = $${params.length}`);
    }
    params.push(o.limit + 1);
    const where = conditions.length ? `where ${conditions.join(" and ")}` : "";
    if (!windowed) {
      const rows = await sql<LoggedRow>(
        em,
        `select ${COLUMNS} from request_log where ${range}${conditions.length ? ` and ${conditions.join(" and ")}` : ""}
          order by id desc limit $${params.length}`,
        params,
      );
      return { rows, scannedTo: undefined };
    }
    params.push(SCAN_WINDOW);
    // One row always comes back, matches or not: the window's end and how full it was, beside the matches.
    const found = await sql<Partial<LoggedRow> & { scanned_to: string | null; scanned: number }>(
      em,
      `with w as (select ${COLUMNS} from request_log where ${range} order by id desc limit $${params.length}),
            m as (select * from w ${where} order by id desc limit $${params.length - 1})
       select m.*, s.scanned_to, s.scanned
         from (select min(id) as scanned_to, count(*)::int as scanned from w) s left join m on true
        order by m.id desc`,
      params,
    );
    const end = found[0];
    const full = (end?.scanned ?? 0) >= SCAN_WINDOW;
    return {
      rows: found.filter((r) => r.id !== null && r.id !== undefined) as LoggedRow[],
      scannedTo: full ? (end?.scanned_to ?? undefined) : undefined,
    };
  },

  /** One of the tenant's calls by id, if it is within `since`. */
  async get(em: Em, tenant: Tenant, id: string, since: string): Promise<LoggedRow | undefined> {
    const [row] = await sql<LoggedRow>(
      em,
      `select ${COLUMNS} from request_log where id = $1 and partner_id = $2 and environment = $3 and id >= $4`,
      [id, tenant.partnerId, tenant.environment, since],
    );
    return row;
  },

  /** Creates today's partition and the {@link DAYS_AHEAD} after it that do not exist yet. */
  ensurePartitions(em: Em, now: Date): Promise<string[]> {
    return ensurePartitions(em, REQUEST_LOG, now, dayStart(now, DAYS_AHEAD));
  },

  /**
   * Drops each day wholly older than the log keeps (its last call more than {@link REQUEST_LOG_DAYS} days before
   * `now`): a detach and a drop, whatever the day held. `em` must not be in a transaction.
   */
  async dropExpired(em: Em, now: Date): Promise<string[]> {
    const cutoff = now.getTime() - REQUEST_LOG_DAYS * ms.day;
    const dropped: string[] = [];
    for (const p of await listPartitions(em, REQUEST_LOG)) {
      if (p.to.getTime() > cutoff) break;
      await dropPartition(em, REQUEST_LOG, p);
      dropped.push(p.name);
    }
    return dropped;
  },
};

/** When a call arrived: the time in its `req_` id. */
export const arrivedAt = (id: string): Date => new Date(decodeTime(id.slice(4)));

/** `\u0000` in JSON text, not preceded by an escaped backslash's odd one out (`\\u0000` is text, kept). */
const NUL_ESCAPE = /(?<!\\)((?:\\\\)*)\\u0000/g;
