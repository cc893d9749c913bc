import { decodeTime, encodeTime } from "ulid";
import type { Em } from "./orm.ts";
import { sql } from "./sql.ts";

/**
 * A table kept as monthly (or daily) range partitions over a ULID column (CONTRACT.md §11, docs/operations.md
 * "Partitions"): a ULID's first ten characters are its time, so the ids of one UTC month are one range, and a
 * lookup by id reads one partition. Partitions are named `<table>_<yyyy>_<mm>` (`<table>_<yyyy>_<mm>_<dd>` by
 * day); `<table>_before`, where there is one, holds everything before the table was partitioned.
 */
export interface PartitionedTable {
  table: string;
  /** The id prefix of the partition key's values (`evt` for `evt_01…`). */
  prefix: string;
  /** A partition per UTC month (the default), or per UTC day for a log dropped a day at a time. */
  period?: "month" | "day";
}

/** One partition: its name and the months it covers, [from, to); `from` is undefined for `<table>_before`. */
export interface Partition {
  name: string;
  from: Date | undefined;
  to: Date;
  /** A detach was started and not finished (a crash between its two steps). */
  detaching: boolean;
}

/** The first instant of the UTC month `add` months after `d`'s. */
export const monthStart = (d: Date, add = 0): Date =>
  new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + add, 1));

/** The first instant of the UTC day `add` days after `d`'s. */
export const dayStart = (d: Date, add = 0): Date =>
  new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + add));

/** The first instant of the table's period (month or day) `add` periods after `d`'s. */
export const periodStart = (t: PartitionedTable, d: Date, add = 0): Date =>
  t.period === "day" ? dayStart(d, add) : monthStart(d, add);

/** The smallest key of the period starting at `start`: the prefix and the ULID time of that instant. */
export const monthKey = (t: PartitionedTable, start: Date): string =>
  `${t.prefix}_${encodeTime(start.getTime(), 10)}`;

const pad = (n: number) => String(n).padStart(2, "0");
const nameOf = (t: PartitionedTable, start: Date) =>
  `${t.table}_${start.getUTCFullYear()}_${pad(start.getUTCMonth() + 1)}` +
  (t.period === "day" ? `_${pad(start.getUTCDate())}` : "");

/** The time a bound's key stands for (`evt_01KB…` → its ULID time). */
const timeOfKey = (key: string): Date =>
  new Date(decodeTime(`${key.slice(key.indexOf("_") + 1)}`.padEnd(26, "0")));

/** The table's partitions, oldest first. */
export async function listPartitions(em: Em, t: PartitionedTable): Promise<Partition[]> {
  const rows = await sql<{ name: string; lower: string | null; upper: string; detaching: boolean }>(
    em,
    `select c.relname as name, i.inhdetachpending as detaching,
            substring(pg_get_expr(c.relpartbound, c.oid) from 'FROM \\(''([^'']*)''\\)') as lower,
            substring(pg_get_expr(c.relpartbound, c.oid) from 'TO \\(''([^'']*)''\\)') as upper
       from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = $1::regclass`,
    [t.table],
  );
  return rows
    .map((r) => ({
      name: r.name,
      from: r.lower === null ? undefined : timeOfKey(r.lower),
      to: timeOfKey(r.upper),
      detaching: r.detaching,
    }))
    .sort((a, b) => a.to.getTime() - b.to.getTime());
}

/**
 * Creates the partitions of the periods from `from`'s to `to`'s (both included) that do not exist yet, each as a
 * table like the parent (its defaults, checks and extended statistics), then attached: ATTACH holds the parent
 * in SHARE UPDATE EXCLUSIVE mode only, so reads and writes go on (CREATE TABLE … PARTITION OF would take it
 * exclusively). A period already covered, by its own partition or by `<table>_before`, is left alone. Concurrent
 * callers take turns (an advisory lock per table). Returns the partitions created.
 */
export async function ensurePartitions(em: Em, t: PartitionedTable, from: Date, to: Date): Promise<string[]> {
  return em.transactional(async (tx) => {
    await sql(tx, "select pg_advisory_xact_lock(hashtext($1))", [`partitions:${t.table}`]);
    await sql(tx, "set local lock_timeout = '5s'");
    const existing = await listPartitions(tx, t);
    const created: string[] = [];
    for (let start = periodStart(t, from); start <= to; start = periodStart(t, start, 1)) {
      const end = periodStart(t, start, 1);
      const covered = existing.some(
        (p) => (p.from === undefined || p.from <= start) && p.to >= end && !p.detaching,
      );
      if (covered) continue;
      const name = nameOf(t, start);
      await sql(
        tx,
        `create table ${name} (like ${t.table} including defaults including constraints including statistics)`,
      );
      await sql(
        tx,
        `alter table ${t.table} attach partition ${name} for values from ('${monthKey(t, start)}') to ('${monthKey(t, end)}')`,
      );
      created.push(name);
    }
    return created;
  });
}

/**
 * Detaches a partition (CONCURRENTLY: the parent is never locked against reads or writes; outside any
 * transaction, so `em` must not be in one) and drops it. A detach left half done by a crash is finished first.
 */
export async function dropPartition(em: Em, t: PartitionedTable, p: Partition): Promise<void> {
  if (em.isInTransaction()) throw new Error("a partition is detached outside any transaction");
  if (p.detaching) await sql(em, `alter table ${t.table} detach partition ${p.name} finalize`);
  else await sql(em, `alter table ${t.table} detach partition ${p.name} concurrently`);
  await sql(em, `drop table ${p.name}`);
}
