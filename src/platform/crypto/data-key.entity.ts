import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * A key for keyed hashes (phone numbers, counterparties) or consent-page CSRF tokens, sealed under the
 * master key. Kept here, it outlives the master key's rotation, so hashes already stored keep matching.
 */
export const DataKeyEntity = defineEntity({
  name: "DataKey",
  tableName: "data_keys",
  properties: {
    /** What the key is for: `phone-hash`, `counterparty-hash` or `consent-csrf`. */
    label: p.text().primary(),
    /** The key sealed under the master key, bound to the label. */
    keyEnc: p.type("bytea"),
    createdAt: p.datetime(),
  },
});

/** A data key row. */
export type DataKey = InferEntity<typeof DataKeyEntity>;
