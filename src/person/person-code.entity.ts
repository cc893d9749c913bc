import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { environments } from "../platform/tenancy.ts";

/**
 * A one-time code the service sent (or, for a phone with no account, pretended to send) to prove that the
 * person on a hosted page holds the phone. Only a keyed hash of the code is kept; rows are purged a day after
 * they were made.
 */
export const PersonCodeEntity = defineEntity({
  name: "PersonCode",
  tableName: "person_codes",
  properties: {
    id: p.text().primary(),
    environment: p.enum(environments),
    /** What the code unlocks: a consent link's id. */
    subject: p.text(),
    /**
     * Whose page it is (the partner, for a consent link). Per-phone limits count per owner, so one partner's
     * wrong codes or sends never lock a person out of another partner's pages.
     */
    owner: p.text(),
    /** The keyed hash of the phone number the page is for (per-phone limits count by it). */
    phoneHash: p.type("bytea"),
    /** HMAC-SHA-256 of `<id>:<code>` under the `person-code` data key. */
    codeHash: p.type("bytea"),
    /** Wrong codes tried against it. */
    attempts: p.integer().default(0),
    createdAt: p.datetime(),
    expiresAt: p.datetime(),
    /** When the right code was given (a code works once). */
    usedAt: p.datetime().nullable(),
  },
  indexes: [
    { name: "person_codes_by_subject", properties: ["subject", "createdAt"] },
    { name: "person_codes_by_phone", properties: ["phoneHash", "owner", "createdAt"] },
    { name: "person_codes_by_age", properties: ["createdAt"] },
  ],
});

/** A one-time code row. */
export type PersonCode = InferEntity<typeof PersonCodeEntity>;
