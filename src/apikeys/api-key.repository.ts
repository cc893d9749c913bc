import { LockMode } from "@mikro-orm/core";
import { notifySql } from "../platform/db/change-feed.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiKeyEntity, type ApiKeyRow } from "./api-key.entity.ts";

/** The API keys feature's table (api_keys): the only code that reads or writes it. */
export const apiKeyRepository = {
  /** A key by id, locked when asked. */
  find(em: Em, id: string, lock = false): Promise<ApiKeyRow | null> {
    return em.findOne(ApiKeyEntity, { id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  },

  /** A key by the SHA-256 of its secret (never by the secret itself). */
  findByHash(em: Em, keyHash: Buffer): Promise<ApiKeyRow | null> {
    return em.findOne(ApiKeyEntity, { keyHash });
  },

  /** A partner's keys, newest first. */
  listForPartner(em: Em, partnerId: string): Promise<ApiKeyRow[]> {
    return em.find(ApiKeyEntity, { partnerId }, { orderBy: { createdAt: "desc", id: "desc" } });
  },

  /** Adds a key (the partial unique index allows one active key per partner and environment). */
  async insert(em: Em, row: ApiKeyRow): Promise<void> {
    em.persist(em.create(ApiKeyEntity, row));
    await em.flush();
  },

  /** Writes the changes made to loaded keys. */
  save(em: Em): Promise<void> {
    return em.flush();
  },

  /** Tells every instance, on commit, that a key changed (they drop it from their caches). */
  async announce(em: Em, id: string): Promise<void> {
    const { sql, params } = notifySql("api_key", id);
    await em.getConnection().execute(sql, params, "all", em.getTransactionContext());
  },
};
