import type pg from "pg";
import { expect } from "vitest";
import { eventually } from "./wait.ts";

/**
 * What the fault tests check of a run of disbursement writes, each sent with its reference as its idempotency key
 * and retried through the faults: every write applied once (one disbursement per reference, the id its `200`
 * answer gave, in `idOf`), then every payout settled (DELIVERED, or CANCELLED for a mandate that lapsed). Returns
 * the ids DELIVERED and the CANCELLED ones with their reasons, for the test to hold against the provider's calls.
 */
export async function settledPayouts(
  db: pg.Client,
  partnerId: string,
  writes: number,
  idOf: (reference: string) => string | undefined,
): Promise<{ delivered: string[]; cancelled: { id: string; failure_reason: string }[] }> {
  const rows = (
    await db.query<{ id: string; reference: string }>(
      "select id, reference from disbursements where partner_id = $1",
      [partnerId],
    )
  ).rows;
  expect(rows.length).toBe(writes);
  expect(new Set(rows.map((r) => r.reference)).size).toBe(writes);
  for (const r of rows) expect(idOf(r.reference), r.reference).toBe(r.id);
  await eventually(
    async () =>
      (
        await db.query(
          "select 1 from disbursements where partner_id = $1 and status not in ('DELIVERED', 'CANCELLED')",
          [partnerId],
        )
      ).rowCount === 0,
    { timeoutMs: 90_000, what: "every accepted payout DELIVERED" },
  );
  const settled = (
    await db.query<{ id: string; status: string; failure_reason: string }>(
      "select id, status, failure_reason from disbursements where partner_id = $1",
      [partnerId],
    )
  ).rows;
  return {
    delivered: settled.filter((r) => r.status === "DELIVERED").map((r) => r.id),
    cancelled: settled.filter((r) => r.status === "CANCELLED"),
  };
}
