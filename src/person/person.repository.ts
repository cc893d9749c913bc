import { LockMode } from "@mikro-orm/core";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type PersonCode, PersonCodeEntity } from "./person-code.entity.ts";
import { type PromptSession, PromptSessionEntity } from "./prompt-session.entity.ts";

/** The person feature's table (person_codes): the only code that reads or writes it. */
export const personRepository = {
  /**
   * Holds the phone's codes for this owner, then the subject's, for the rest of the transaction, so counts
   * and checks see every concurrent writer (always in this order: no two transactions wait on each other).
   */
  async lockSubject(tx: Em, subject: string, owner: string, phoneHash: Buffer): Promise<void> {
    await sql(
      tx,
      "select pg_advisory_xact_lock(hashtextextended($1, 0)), pg_advisory_xact_lock(hashtextextended($2, 0))",
      [`person-phone:${owner}:${phoneHash.toString("base64")}`, `person-code:${subject}`],
    );
  },

  /**
   * Codes made for the subject, and for the phone by this owner, since `since`; wrong tries on the subject
   * and on the phone by this owner.
   */
  async counts(
    tx: Em,
    subject: string,
    owner: string,
    phoneHash: Buffer,
    since: Date,
    failuresSince: Date,
  ): Promise<{ subjectSends: number; phoneSends: number; subjectFailures: number; phoneFailures: number }> {
    const [row] = await sql<{
      subject_sends: number;
      phone_sends: number;
      subject_failures: number;
      phone_failures: number;
    }>(
      tx,
      `select
         (select count(*) from person_codes where subject = $1 and created_at > $3)::int as subject_sends,
         (select count(*) from person_codes
           where phone_hash = $2 and owner = $5 and created_at > $3)::int as phone_sends,
         (select coalesce(sum(attempts), 0) from person_codes where subject = $1)::int as subject_failures,
         (select coalesce(sum(attempts), 0) from person_codes
           where phone_hash = $2 and owner = $5 and created_at > $4)::int as phone_failures`,
      [subject, phoneHash, since, failuresSince, owner],
    );
    return {
      subjectSends: row?.subject_sends ?? 0,
      phoneSends: row?.phone_sends ?? 0,
      subjectFailures: row?.subject_failures ?? 0,
      phoneFailures: row?.phone_failures ?? 0,
    };
  },

  /** The oldest code made for the subject or the phone since `since` (when the next send is allowed again). */
  async oldestSince(
    tx: Em,
    subject: string,
    owner: string,
    phoneHash: Buffer,
    since: Date,
  ): Promise<Date | undefined> {
    const [row] = await sql<{ created_at: Date }>(
      tx,
      `select min(created_at) as created_at from person_codes
        where (subject = $1 or (phone_hash = $2 and owner = $4)) and created_at > $3`,
      [subject, phoneHash, since, owner],
    );
    return row?.created_at ?? undefined;
  },

  async insert(tx: Em, row: PersonCode): Promise<void> {
    tx.create(PersonCodeEntity, row);
    await tx.flush();
  },

  /** The subject's newest code. */
  newest(tx: Em, subject: string): Promise<PersonCode | null> {
    return tx.findOne(PersonCodeEntity, { subject }, { orderBy: { createdAt: "desc", id: "desc" } });
  },

  /** Writes the changes made to loaded codes. */
  save(tx: Em): Promise<void> {
    return tx.flush();
  },

  async insertSession(tx: Em, row: PromptSession): Promise<void> {
    tx.create(PromptSessionEntity, row);
    await tx.flush();
  },

  /** A prompt session by its token's hash, locked. */
  sessionByToken(tx: Em, tokenHash: Buffer): Promise<PromptSession | null> {
    return tx.findOne(PromptSessionEntity, { tokenHash }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  },

  /** A prompt session, locked when asked (in a transaction). */
  session(em: Em, id: string, lock: boolean): Promise<PromptSession | null> {
    return em.findOne(PromptSessionEntity, { id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  },

  /** Deletes codes and prompt sessions made before `before`, a batch at a time; returns how many. */
  async purge(em: Em, before: Date, batch: number): Promise<number> {
    let total = 0;
    for (const table of ["person_codes", "prompt_sessions"]) {
      for (;;) {
        const rows = await sql(
          em,
          `delete from ${table} where id in (select id from ${table} where created_at < $1 limit $2) returning id`,
          [before, batch],
        );
        total += rows.length;
        if (rows.length < batch) break;
      }
    }
    return total;
  },
};
