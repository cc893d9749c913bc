import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { environments } from "../platform/tenancy.ts";

/**
 * A consent prompt the platform opened for a person it had signed in: a single-use URL, good for minutes,
 * that lets that person, and only that person, answer one hosted page without a texted code.
 */
export const PromptSessionEntity = defineEntity({
  name: "PromptSession",
  tableName: "prompt_sessions",
  properties: {
    id: p.text().primary(),
    environment: p.enum(environments),
    /** SHA-256 of the URL's token. */
    tokenHash: p.type("bytea").unique("prompt_sessions_token_hash_key"),
    /** The signed-in person. */
    userId: p.text(),
    /** What it answers: a consent link's id. */
    subject: p.text(),
    createdAt: p.datetime(),
    expiresAt: p.datetime(),
    /** When the URL was opened (it opens once). */
    openedAt: p.datetime().nullable(),
    /** When the page it opened was answered (it answers once). */
    usedAt: p.datetime().nullable(),
  },
  indexes: [{ name: "prompt_sessions_by_age", properties: ["createdAt"] }],
});

/** A prompt session row. */
export type PromptSession = InferEntity<typeof PromptSessionEntity>;
