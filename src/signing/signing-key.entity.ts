import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * An Ed25519 snapshot-signing key of one environment (CONTRACT.md §3). Its status is not stored: it follows
 * from the three times below, so every instance agrees on it without coordination.
 */
export const SigningKeyEntity = defineEntity({
  name: "SigningKey",
  tableName: "signing_keys",
  properties: {
    kid: p.string().primary(),
    environment: p.enum(["sandbox", "production"] as const),
    publicKey: p.type("bytea"),
    /** PKCS#8 private key sealed with AES-256-GCM under the master key, bound to the kid. */
    privateKeyEnc: p.type("bytea"),
    /** Signs from here (INCOMING before). */
    notBefore: p.datetime(),
    /** Stops signing here (OUTGOING after). */
    retiresAt: p.datetime(),
    /** Unlisted from here: signatures made with it no longer verify. */
    notAfter: p.datetime(),
    createdAt: p.datetime(),
  },
});

/** A signing key row. */
export type SigningKeyRow = InferEntity<typeof SigningKeyEntity>;
