import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/** The two environments (CONTRACT.md §2). One deployment serves both; the API key decides. */
export type Environment = "sandbox" | "production";

/** A partner API key. Only the SHA-256 of the secret is stored (CONTRACT.md §2). */
export const ApiKeyEntity = defineEntity({
  name: "ApiKey",
  tableName: "api_keys",
  properties: {
    id: p.string().primary(),
    partnerId: p.string(),
    environment: p.enum(["sandbox", "production"] as const),
    /** SHA-256 of the whole key. */
    keyHash: p.type("bytea"),
    /** The first 12 characters, for people to recognise the key. */
    prefix: p.string(),
    createdAt: p.datetime(),
    /** Set when the key is rolled: it works until then. */
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    /** The key that replaced this one in a roll. */
    rolledTo: p.string().nullable(),
  },
});

/** An API key row. */
export type ApiKeyRow = InferEntity<typeof ApiKeyEntity>;
