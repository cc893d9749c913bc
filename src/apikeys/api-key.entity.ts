import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments } from "../platform/tenancy.ts";

/** A partner API key. Only the SHA-256 of the secret is stored (CONTRACT.md §2). */
export const ApiKeyEntity = defineEntity({
  name: "ApiKey",
  tableName: "api_keys",
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p.manyToOne(PartnerEntity).mapToPk().fieldName("partner_id").foreignKeyName("api_keys_partner_id_fkey"),
    environment: p.enum(environments),
    /** SHA-256 of the whole key (32 bytes). */
    keyHash: p.type("bytea").unique("api_keys_key_hash_key"),
    /** The first 12 characters, for people to recognise the key. */
    prefix: p.text(),
    createdAt: p.datetime(),
    /** Set when the key is rolled: it works until then. */
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    /** The key that replaced this one in a roll. */
    rolledTo: () =>
      p
        .manyToOne(ApiKeyEntity)
        .mapToPk()
        .nullable()
        .deleteRule("no action")
        .fieldName("rolled_to")
        .foreignKeyName("api_keys_rolled_to_fkey"),
  },
  checks: [{ name: "api_keys_key_hash_check", expression: "octet_length(key_hash) = 32" }],
  uniques: [
    // CONTRACT.md §2: at most one active key per partner and environment (plus rolled keys until they expire).
    {
      name: "api_keys_one_active",
      properties: ["partnerId", "environment"],
      where: "expires_at is null and revoked_at is null",
    },
  ],
  indexes: [
    {
      name: "api_keys_by_partner",
      columns: [{ name: "partnerId" }, { name: "createdAt", sort: "desc" }],
    },
  ],
});

/** An API key row. */
export type ApiKeyRow = InferEntity<typeof ApiKeyEntity>;
