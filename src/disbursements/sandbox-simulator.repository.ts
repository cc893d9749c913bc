import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";

/** What the simulator recorded for a transfer or a debit. */
export interface SimulatedAnswer {
  status: string;
  failure_reason: string | null;
}

/**
 * Records `first` for a reference that has no answer yet and answers what is recorded, in one statement. The
 * no-op update on a conflict is what makes `returning` answer the row already there (a retried call, or an
 * answer a sandbox helper set), read under its row lock, so a record committed meanwhile is never missed.
 */
const recordFirst = (table: "sandbox_transfers" | "sandbox_debits") =>
  `insert into ${table} (reference, amount_kobo, status, failure_reason, created_at)
   values ($1, $2, $3, $4, now())
   on conflict (reference) do update set status = ${table}.status
   returning status, failure_reason`;

const RECORD_TRANSFER = recordFirst("sandbox_transfers");
const RECORD_DEBIT = recordFirst("sandbox_debits");

/**
 * The sandbox payment simulator's records (`sandbox_transfers`, `sandbox_debits`): what it answers for each
 * reference, as a real provider's idempotent reference does, and what the sandbox helpers change.
 */
export const sandboxSimulatorRepository = {
  /** The simulator's recorded answer for a transfer, recorded first as `first` if it has none. */
  async transfer(
    em: Em,
    reference: string,
    amountKobo: bigint,
    first: { status: string; reason: string | null },
  ): Promise<SimulatedAnswer | undefined> {
    const [row] = await sql<SimulatedAnswer>(em, RECORD_TRANSFER, [
      reference,
      amountKobo.toString(),
      first.status,
      first.reason,
    ]);
    return row;
  },

  /** Changes the simulator's answer for a transfer (as the provider would), recording it if it had none. */
  async setTransfer(
    em: Em,
    reference: string,
    amountKobo: bigint,
    to: { status: "FAILED" | "REVERSED"; reason: string; onlyFrom?: string },
  ): Promise<void> {
    await sql(
      em,
      `insert into sandbox_transfers (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now())
       on conflict (reference) do update set status = excluded.status, failure_reason = excluded.failure_reason
        where $5::text is null or sandbox_transfers.status = $5`,
      [reference, amountKobo.toString(), to.status, to.reason, to.onlyFrom ?? null],
    );
  },

  /** The simulator's recorded answer for a debit, recorded first as `first` if it has none. */
  async debit(
    em: Em,
    reference: string,
    amountKobo: bigint,
    first: { status: string; reason: string | null },
  ): Promise<SimulatedAnswer | undefined> {
    const [row] = await sql<SimulatedAnswer>(em, RECORD_DEBIT, [
      reference,
      amountKobo.toString(),
      first.status,
      first.reason,
    ]);
    return row;
  },

  /** Sets the simulator's answer for a debit (as the provider would answer it). */
  async setDebit(
    em: Em,
    reference: string,
    amountKobo: bigint,
    to: { status: "SUCCESS" | "FAILED"; reason: string | null },
  ): Promise<void> {
    await sql(
      em,
      `insert into sandbox_debits (reference, amount_kobo, status, failure_reason, created_at)
       values ($1, $2, $3, $4, now())
       on conflict (reference) do update set status = excluded.status, failure_reason = excluded.failure_reason`,
      [reference, amountKobo.toString(), to.status, to.reason],
    );
  },
};
