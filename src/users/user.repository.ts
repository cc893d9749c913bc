import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Environment } from "../platform/tenancy.ts";
import { PaymentInstrumentEntity } from "./payment-instrument.entity.ts";
import { type User, UserEntity } from "./user.entity.ts";

/** The users feature's tables (users, payment_instruments): the only code that reads or writes them. */
export const userRepository = {
  /**
   * Creates or updates a user in its environment, in one statement: nothing when the id exists in the other
   * environment (undefined), else whether it was created.
   */
  async upsert(em: Em, row: User): Promise<{ created: boolean } | undefined> {
    const [result] = await sql<{ created: boolean }>(
      em,
      `insert into users (id, environment, phone_hash, phone_enc, phone_last4, segment, created_at, updated_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8)
       on conflict (id) do update
         set phone_hash = excluded.phone_hash, phone_enc = excluded.phone_enc, phone_last4 = excluded.phone_last4,
             segment = excluded.segment, updated_at = excluded.updated_at
         where users.environment = excluded.environment
       returning (xmax = 0) as created`,
      [
        row.id,
        row.environment,
        row.phoneHash,
        row.phoneEnc,
        row.phoneLast4,
        row.segment,
        row.createdAt,
        row.updatedAt,
      ],
    );
    return result;
  },

  /** A user's environment, or undefined when there is no such user. */
  async environmentOf(em: Em, userId: string): Promise<Environment | undefined> {
    const user = await em.findOne(UserEntity, { id: userId }, { fields: ["id", "environment"] });
    return user?.environment;
  },

  /** The user with this phone number (its keyed hash) in the environment. */
  async byPhone(em: Em, environment: Environment, phoneHash: Buffer): Promise<string | undefined> {
    const user = await em.findOne(UserEntity, { environment, phoneHash }, { fields: ["id"] });
    return user?.id;
  },

  /** The keyed hash and last four digits of a user's phone number. */
  async contactOf(em: Em, userId: string): Promise<{ phoneHash: Buffer; phoneLast4: string } | undefined> {
    const user = await em.findOne(UserEntity, { id: userId }, { fields: ["phoneHash", "phoneLast4"] });
    return user ? { phoneHash: user.phoneHash, phoneLast4: user.phoneLast4 } : undefined;
  },

  /** The user with this phone number in the environment, with the sealed number. */
  async sealedPhoneOf(
    em: Em,
    environment: Environment,
    phoneHash: Buffer,
  ): Promise<{ id: string; phoneEnc: Buffer } | undefined> {
    const user = await em.findOne(UserEntity, { environment, phoneHash }, { fields: ["id", "phoneEnc"] });
    return user ? { id: user.id, phoneEnc: user.phoneEnc } : undefined;
  },

  /** Those of these users that exist. */
  async existing(em: Em, userIds: string[]): Promise<Set<string>> {
    const rows = await em.find(UserEntity, { id: { $in: [...new Set(userIds)] } }, { fields: ["id"] });
    return new Set(rows.map((r) => r.id));
  },

  /** Replaces a user's sealed instruments; false when there is no such user. */
  async putInstruments(
    em: Em,
    userId: string,
    sealed: Buffer,
    on: { bank: boolean; wallet: boolean; debit: boolean },
    at: Date,
  ): Promise<boolean> {
    const rows = await sql(
      em,
      `insert into payment_instruments (user_id, sealed, has_bank, has_wallet, has_debit, updated_at)
       select id, $2, $3, $4, $5, $6 from users where id = $1
       on conflict (user_id) do update set sealed = excluded.sealed, has_bank = excluded.has_bank,
         has_wallet = excluded.has_wallet, has_debit = excluded.has_debit, updated_at = excluded.updated_at
       returning user_id`,
      [userId, sealed, on.bank, on.wallet, on.debit, at],
    );
    return rows.length > 0;
  },

  /** A user's instruments row, if any. */
  instruments(em: Em, userId: string) {
    return em.findOne(PaymentInstrumentEntity, { userId });
  },
};
