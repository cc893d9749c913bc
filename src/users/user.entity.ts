import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { environments } from "../platform/tenancy.ts";

/**
 * A person the platform feeds us, per environment. The phone number is never stored in the clear: a keyed
 * hash matches consent links to the person, and a sealed copy serves the last four digits for display.
 */
export const UserEntity = defineEntity({
  name: "User",
  tableName: "users",
  properties: {
    id: p.text().primary(),
    environment: p.enum(environments),
    /** HMAC-SHA-256 of the normalised number under the `phone-hash` data key. */
    phoneHash: p.type("bytea"),
    /** The number sealed under the master key, bound to the user. */
    phoneEnc: p.type("bytea"),
    phoneLast4: p.text(),
    segment: p.enum(["trader", "salaried", "gig", "other"] as const),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
  uniques: [
    // A unique index, not a constraint: MikroORM declares `uniques` as constraints, so it is given whole.
    {
      name: "users_by_phone",
      expression: "create unique index users_by_phone on users (environment, phone_hash)",
    },
  ],
});

/** A user row. */
export type User = InferEntity<typeof UserEntity>;
