import { randomInt } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { LedgerEntry_Direction } from "../../gen/internal/v1/ingest_pb.ts";
import type { TestApp } from "../support/app.ts";

/** An entry as the test generated it, to check the service's figures against. */
export interface GeneratedEntry {
  id: string;
  userId: string;
  amountKobo: bigint;
  direction: "IN" | "OUT";
  counterpartyId: string;
  occurredAt: Date;
}

/** Random entries over the last `days` days, from a small pool of counterparties so they repeat. */
export function generateEntries(userId: string, count: number, days = 400, parties = 40): GeneratedEntry[] {
  const now = Date.now();
  return Array.from({ length: count }, (_, i) => ({
    id: `le_${userId}_${i}_${randomInt(1e9)}`,
    userId,
    amountKobo: BigInt(randomInt(1, 5_000_000)),
    direction: randomInt(3) === 0 ? "OUT" : "IN",
    counterpartyId: `cp-${userId}-${randomInt(parties)}`,
    occurredAt: new Date(now - randomInt(0, days * 86_400_000)),
  }));
}

/** Sends entries over the internal gRPC-compatible API, in batches. */
export async function ingestEntries(
  t: TestApp,
  entries: GeneratedEntry[],
): Promise<{ inserted: number; duplicates: number }> {
  let inserted = 0;
  let duplicates = 0;
  for (let i = 0; i < entries.length; i += 1000) {
    const res = await t.internal.ingest.ingestLedgerEntries({
      entries: entries.slice(i, i + 1000).map((e) => ({
        id: e.id,
        userId: e.userId,
        amountKobo: e.amountKobo,
        direction: e.direction === "IN" ? LedgerEntry_Direction.INFLOW : LedgerEntry_Direction.OUTFLOW,
        counterpartyId: e.counterpartyId,
        channel: "transfer",
        occurredAt: timestampFromDate(e.occurredAt),
      })),
    });
    inserted += res.inserted;
    duplicates += res.duplicates;
  }
  return { inserted, duplicates };
}

/** What a ledger window must say, computed by brute force over the raw entries. */
export function bruteForceWindow(entries: GeneratedEntry[], days: number, today = new Date()) {
  const day = (d: Date) => d.toISOString().slice(0, 10);
  const to = day(today);
  const from = day(new Date(Date.parse(`${to}T00:00:00Z`) - (days - 1) * 86_400_000));
  const from30 = day(new Date(Date.parse(`${to}T00:00:00Z`) - 29 * 86_400_000));
  const inWindow = entries.filter((e) => day(e.occurredAt) >= from && day(e.occurredAt) <= to);
  const flow = (dir: "IN" | "OUT") => {
    const list = inWindow.filter((e) => e.direction === dir);
    return {
      totalKobo: list.reduce((s, e) => s + e.amountKobo, 0n).toString(),
      count: list.length,
      distinctCounterparties: new Set(list.map((e) => e.counterpartyId)).size,
    };
  };
  const inflow = flow("IN");
  const senders30 = new Set(
    entries.filter((e) => e.direction === "IN" && day(e.occurredAt) >= from30).map((e) => e.counterpartyId),
  ).size;
  return {
    days,
    from,
    to,
    inflow,
    outflow: flow("OUT"),
    dailyAvgInflowKobo: (BigInt(inflow.totalKobo) / BigInt(days)).toString(),
    distinctSendersLast30d: senders30,
  };
}

/** A plain random suffix. */
export const suffix = () => randomInt(1e9).toString(36);
