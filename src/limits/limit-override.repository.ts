import { notifySql } from "../platform/db/change-feed.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { LimitOverrides } from "./limits.ts";

interface Row {
  environment: Environment;
  key_id: string;
  read_capacity: number | null;
  read_refill: number | null;
  write_capacity: number | null;
  write_refill: number | null;
  snapshot_concurrency: number | null;
  disbursements_per_user_per_day: number | null;
}

/** One stored override: the partner's own in an environment (`keyId` '') or a key's. */
export interface StoredOverride {
  environment: Environment;
  keyId: string;
  overrides: LimitOverrides;
}

// numeric comes back as text unless cast: the refills are read as float8.
const COLUMNS = `environment, key_id, read_capacity, read_refill_per_second::float8 as read_refill,
  write_capacity, write_refill_per_second::float8 as write_refill, snapshot_concurrency, disbursements_per_user_per_day`;

const bucket = (capacity: number | null, refill: number | null) =>
  capacity !== null && refill !== null ? { capacity, refillPerSecond: refill } : undefined;

function toStored(r: Row): StoredOverride {
  const overrides: LimitOverrides = {};
  const read = bucket(r.read_capacity, r.read_refill);
  const write = bucket(r.write_capacity, r.write_refill);
  if (read) overrides.read = read;
  if (write) overrides.write = write;
  if (r.snapshot_concurrency !== null) overrides.snapshotConcurrency = r.snapshot_concurrency;
  if (r.disbursements_per_user_per_day !== null)
    overrides.disbursementsPerUserPerDay = r.disbursements_per_user_per_day;
  return { environment: r.environment, keyId: r.key_id, overrides };
}

/**
 * The limit overrides' table (limit_overrides): the only code that reads or writes it. Raw SQL with the tenant
 * named in every statement: the read is on the path of a key's first request on each instance, and a write
 * sets some columns of a row that may not exist yet.
 */
export const limitOverrideRepository = {
  /** The partner's override in the key's environment and the key's own, in one query. */
  async forKey(
    em: Em,
    partnerId: string,
    environment: Environment,
    keyId: string,
  ): Promise<{ partner?: LimitOverrides; key?: LimitOverrides }> {
    const rows = await sql<Row>(
      em,
      `select ${COLUMNS} from limit_overrides
        where partner_id = $1 and environment = $2 and key_id in ('', $3)`,
      [partnerId, environment, keyId],
    );
    const found = rows.map(toStored);
    return {
      partner: found.find((o) => o.keyId === "")?.overrides,
      key: found.find((o) => o.keyId === keyId)?.overrides,
    };
  },

  /** Every override of a partner (its own per environment and its keys'), keys newest first. */
  async forPartner(em: Em, partnerId: string): Promise<StoredOverride[]> {
    const rows = await sql<Row>(
      em,
      `select ${COLUMNS} from limit_overrides where partner_id = $1 order by environment, key_id desc`,
      [partnerId],
    );
    return rows.map(toStored);
  },

  /**
   * Serialises the changes to one partner's limits until the transaction ends, so two operators changing them
   * at once never lose one of the changes (and buckets are settled against the limits they really had).
   */
  async lock(tx: Em, partnerId: string): Promise<void> {
    await sql(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [`limit_overrides:${partnerId}`]);
  },

  /** Writes an override whole (deleting the row when it sets nothing). */
  async save(
    tx: Em,
    partnerId: string,
    environment: Environment,
    keyId: string,
    o: LimitOverrides,
    now: Date,
  ): Promise<void> {
    const values = [
      o.read?.capacity ?? null,
      o.read?.refillPerSecond ?? null,
      o.write?.capacity ?? null,
      o.write?.refillPerSecond ?? null,
      o.snapshotConcurrency ?? null,
      o.disbursementsPerUserPerDay ?? null,
    ];
    if (values.every((v) => v === null)) {
      await sql(
        tx,
        "delete from limit_overrides where partner_id = $1 and environment = $2 and key_id = $3",
        [partnerId, environment, keyId],
      );
      return;
    }
    await sql(
      tx,
      `insert into limit_overrides (partner_id, environment, key_id, read_capacity, read_refill_per_second,
         write_capacity, write_refill_per_second, snapshot_concurrency, disbursements_per_user_per_day, updated_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       on conflict (partner_id, environment, key_id) do update set
         read_capacity = excluded.read_capacity, read_refill_per_second = excluded.read_refill_per_second,
         write_capacity = excluded.write_capacity, write_refill_per_second = excluded.write_refill_per_second,
         snapshot_concurrency = excluded.snapshot_concurrency,
         disbursements_per_user_per_day = excluded.disbursements_per_user_per_day, updated_at = excluded.updated_at`,
      [partnerId, environment, keyId, ...values, now],
    );
  },

  /** Tells every instance, on commit, that a partner's limits changed (they drop what they cached). */
  async announce(tx: Em, partnerId: string): Promise<void> {
    const { sql: text, params } = notifySql("limits", partnerId);
    await tx.getConnection().execute(text, params, "all", tx.getTransactionContext());
  },
};
