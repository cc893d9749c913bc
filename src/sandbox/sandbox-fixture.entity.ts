import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/** The upkeep of a set of sandbox fixtures: how far the fixture users' generated ledger reaches. */
export const SandboxFixtureEntity = defineEntity({
  name: "SandboxFixture",
  tableName: "sandbox_fixtures",
  properties: {
    /** The fixture set (`users`). */
    name: p.text().primary(),
    /** The generator's version: a new version reseeds. */
    version: p.integer(),
    /** The last UTC day seeded, `YYYY-MM-DD`; topped up day by day. */
    seededThrough: p.date(),
  },
});

/** A sandbox fixture row. */
export type SandboxFixture = InferEntity<typeof SandboxFixtureEntity>;
