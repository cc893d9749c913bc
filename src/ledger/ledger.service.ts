import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import { keyedHash } from "../platform/crypto/keys.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { validationFailed } from "../platform/errors.ts";
import type { UserService } from "../users/user.service.ts";
import { ledgerRepository, type RebuiltRollups } from "./ledger.repository.ts";

/** One entry as the platform sends it. */
export interface LedgerEntryInput {
  id: string;
  userId: string;
  amountKobo: bigint;
  direction: "IN" | "OUT";
  counterpartyId: string;
  channel: string;
  occurredAt: Date;
  /**
   * Whose copy of the user the line belongs to: unset (`''`) for the platform's own ledger; in sandbox, the
   * partner whose collection or refund wrote it, so only that partner's snapshots count it.
   */
  scope?: string;
}

/** The channels the platform reports. */
export const channels = ["transfer", "card", "pos", "ussd", "wallet", "other"] as const;

const MAX_BATCH = 5_000;
/** Users one rebuild takes at most: a heavy trader's year is ~50,000 entries, and their batches wait while it runs. */
export const MAX_REBUILD_USERS = 100;
const ENTRY_ID = /^[\x21-\x7e]{1,128}$/;
/** Entries may not be dated in the future (beyond clock skew): windows end on the day of the read. */
const FUTURE_SKEW_MS = 5 * ms.minute;

/** What {@link createLedgerService} returns. */
export type LedgerService = ReturnType<typeof createLedgerService>;

/** UTC day of a time, as `YYYY-MM-DD`. */
export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/**
 * Ledger ingest. One statement per batch inserts the new entries (idempotent by the platform's id) and
 * folds exactly those into the daily roll-ups and the counterparty index, so a snapshot never scans raw
 * entries and a re-sent batch changes nothing.
 */
export function createLedgerService({
  clock,
  counterpartyKey,
  users,
}: {
  clock: Clock;
  counterpartyKey: Buffer;
  users: UserService;
}) {
  return {
    /**
     * Deletes the ledger lines a sandbox partner's collections and refunds wrote on the sandbox users (the
     * sandbox reset), in the caller's transaction.
     */
    deleteSandboxLines(tx: Em, partnerId: string): Promise<number> {
      return ledgerRepository.deleteScope(tx, partnerId);
    },

    /**
     * Rebuilds the users' daily roll-ups and counterparty index from their raw entries (the operator's repair,
     * `npm run cli -- ledger rebuild --user U`), with the statement ingest folds new entries with, in one
     * transaction. Idempotent: a rebuild of correct roll-ups writes the same rows.
     */
    async rebuildRollups(em: Em, userIds: string[]): Promise<RebuiltRollups> {
      const ids = [...new Set(userIds)];
      if (ids.length === 0) throw validationFailed({ userIds: "name at least one user" });
      if (ids.length > MAX_REBUILD_USERS)
        throw validationFailed({ userIds: `at most ${MAX_REBUILD_USERS} users per call` });
      await users.assertExist(em, ids);
      return inTransaction(em, (tx) => ledgerRepository.rebuildRollups(tx, ids));
    },

    /** Ingests a batch on `em`, inside its transaction when it has one (a repayment writes its entry with its booking). */
    async ingest(em: Em, entries: LedgerEntryInput[]): Promise<{ inserted: number; duplicates: number }> {
      if (entries.length === 0) return { inserted: 0, duplicates: 0 };
      if (entries.length > MAX_BATCH)
        throw validationFailed({ entries: `at most ${MAX_BATCH} entries per call` });
      const latest = clock.now().getTime() + FUTURE_SKEW_MS;
      entries.forEach((e, i) => {
        const bad = (field: string, why: string) => validationFailed({ [`entries[${i}].${field}`]: why });
        if (!ENTRY_ID.test(e.id)) throw bad("id", "must be 1 to 128 visible ASCII characters");
        if (e.amountKobo <= 0n) throw bad("amountKobo", "must be positive");
        if (e.counterpartyId === "") throw bad("counterpartyId", "is required");
        if (!(channels as readonly string[]).includes(e.channel))
          throw bad("channel", `must be one of ${channels.join(", ")}`);
        if (Number.isNaN(e.occurredAt.getTime()) || e.occurredAt.getTime() > latest)
          throw bad("occurredAt", "must be a time not in the future");
      });
      await users.assertExist(
        em,
        entries.map((e) => e.userId),
      );
      const run = () =>
        ledgerRepository.ingest(
          em,
          entries.map((e) => ({
            ...e,
            counterpartyHash: keyedHash(counterpartyKey, `${e.userId}:${e.counterpartyId}`),
          })),
        );
      // The batch is atomic, so a deadlock with a concurrent batch is retried whole.
      let inserted = 0;
      for (let attempt = 1; ; attempt++) {
        try {
          inserted = await run();
          break;
        } catch (err) {
          // Inside a caller's transaction the failed statement has aborted it: the caller retries.
          if ((err as { code?: string }).code !== "40P01" || attempt >= 5 || em.isInTransaction()) throw err;
        }
      }
      return { inserted, duplicates: entries.length - inserted };
    },
  };
}
