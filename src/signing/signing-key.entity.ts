import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { environments } from "../platform/tenancy.ts";

/**
 * An Ed25519 snapshot-signing key of one environment (CONTRACT.md §3). Its status is not stored: it follows
 * from the three times below, so every instance agrees on it without coordination.
 */
export const SigningKeyEntity = defineEntity({
  name: "SigningKey",
  tableName: "signing_keys",
  properties: {
    kid: p.text().primary(),
    environment: p.enum(environments),
    /** The raw 32-byte Ed25519 public key. */
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
  checks: [
    { name: "signing_keys_public_key_check", expression: "octet_length(public_key) = 32" },
    { name: "signing_keys_check", expression: "not_before < retires_at and retires_at <= not_after" },
  ],
  uniques: [
    // Two instances scheduling the same quarter's key race on this index; one wins, the other re-reads.
    // A unique index, not a constraint: MikroORM declares `uniques` as constraints, so it is given whole.
    {
      name: "signing_keys_one_per_start",
      expression: "create unique index signing_keys_one_per_start on signing_keys (environment, not_before)",
    },
  ],
});

/** A signing key row. */
export type SigningKeyRow = InferEntity<typeof SigningKeyEntity>;
