import { LockMode } from "@mikro-orm/core";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type SandboxStanding, SandboxStandingEntity } from "./sandbox-standing.entity.ts";
import { type Standing, StandingEntity } from "./standing.entity.ts";
import type { KycInput } from "./standing.service.ts";

/** The standing feature's tables (standings, sandbox_standings, kyc): the only code that reads or writes them. */
export const standingRepository = {
  /** The stored standings of these users, locked until the transaction ends. */
  lockStandings(tx: Em, userIds: string[]): Promise<Standing[]> {
    return tx.find(StandingEntity, { userId: { $in: userIds } }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  },

  /** A user's stored standing, if any. */
  standing(em: Em, userId: string): Promise<Standing | null> {
    return em.findOne(StandingEntity, { userId });
  },

  /** A sandbox partner's own re-score of a user, locked until the transaction ends. */
  lockSandboxStanding(tx: Em, partnerId: string, userId: string): Promise<SandboxStanding | null> {
    return tx.findOne(SandboxStandingEntity, { partnerId, userId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  },

  /** Creates or replaces a sandbox partner's own re-score of a user. */
  async putSandboxStanding(tx: Em, row: SandboxStanding): Promise<void> {
    await tx.upsert(SandboxStandingEntity, row);
  },

  /** Forgets a sandbox partner's re-scores; returns how many there were. */
  async deleteSandboxStandings(tx: Em, partnerId: string): Promise<number> {
    const rows = await sql(tx, "delete from sandbox_standings where partner_id = $1 returning user_id", [
      partnerId,
    ]);
    return rows.length;
  },

  /** Creates or replaces a user's standing. */
  async putStanding(tx: Em, row: Standing): Promise<void> {
    await tx.upsert(StandingEntity, row);
  },

  /** Creates or replaces users' KYC, in one statement; returns how many rows were written. */
  async putKyc(em: Em, updates: KycInput[], at: Date): Promise<number> {
    const rows = await sql(
      em,
      `insert into kyc (user_id, level, bvn_verified, nin_verified, phone_verified, address_verified, liveness_checked, verified_at, updated_at)
       select * from unnest($1::text[], $2::text[], $3::bool[], $4::bool[], $5::bool[], $6::bool[], $7::bool[], $8::timestamptz[], $9::timestamptz[])
       on conflict (user_id) do update set level = excluded.level, bvn_verified = excluded.bvn_verified,
         nin_verified = excluded.nin_verified, phone_verified = excluded.phone_verified,
         address_verified = excluded.address_verified, liveness_checked = excluded.liveness_checked,
         verified_at = excluded.verified_at, updated_at = excluded.updated_at
       returning user_id`,
      [
        updates.map((u) => u.userId),
        updates.map((u) => u.level),
        updates.map((u) => u.bvnVerified),
        updates.map((u) => u.ninVerified),
        updates.map((u) => u.phoneVerified),
        updates.map((u) => u.addressVerified),
        updates.map((u) => u.livenessChecked),
        updates.map((u) => u.verifiedAt),
        updates.map(() => at),
      ],
    );
    return rows.length;
  },
};
