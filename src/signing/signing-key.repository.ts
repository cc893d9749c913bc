import { notifySql } from "../platform/db/change-feed.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Environment } from "../platform/tenancy.ts";
import { SigningKeyEntity, type SigningKeyRow } from "./signing-key.entity.ts";

/** Fixed advisory lock ids, one per environment's key schedule. */
const lockId: Record<Environment, number> = { sandbox: 7_104_223_311, production: 7_104_223_312 };

/** The signing feature's table (signing_keys): the only code that reads or writes it. */
export const signingKeyRepository = {
  /** An environment's keys, oldest first. */
  list(em: Em, environment: Environment): Promise<SigningKeyRow[]> {
    return em.find(SigningKeyEntity, { environment }, { orderBy: { notBefore: "asc" } });
  },

  /** Any one key (the start-up check that MASTER_KEY opens this database). */
  async any(em: Em): Promise<SigningKeyRow | undefined> {
    const [row] = await em.find(SigningKeyEntity, {}, { limit: 1 });
    return row;
  },

  /** Takes an environment's schedule lock until the transaction ends, so instances change keys in turn. */
  async lockEnvironment(tx: Em, environment: Environment): Promise<void> {
    await tx
      .getConnection()
      .execute("select pg_advisory_xact_lock(?)", [lockId[environment]], "all", tx.getTransactionContext());
  },

  /** Adds a key; written with the transaction's other changes by {@link save}. */
  add(em: Em, row: SigningKeyRow): void {
    em.persist(em.create(SigningKeyEntity, row));
  },

  /** Writes the changes made, then tells every instance, on commit, that the environment's keys changed. */
  async saveAndAnnounce(tx: Em, environment: Environment): Promise<void> {
    await tx.flush();
    const { sql, params } = notifySql("signing_keys", environment);
    await tx.getConnection().execute(sql, params, "all", tx.getTransactionContext());
  },
};
