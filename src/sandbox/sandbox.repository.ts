import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type SandboxFixture, SandboxFixtureEntity } from "./sandbox-fixture.entity.ts";

/** The sandbox feature's table (sandbox_fixtures): the only code that reads or writes it. */
export const sandboxRepository = {
  /** How far a set of fixtures has been seeded, if at all. */
  state(em: Em, name: string): Promise<SandboxFixture | null> {
    return em.findOne(SandboxFixtureEntity, { name });
  },

  /**
   * Records a set of fixtures as seeded through `day` at `version`; concurrent seeders agree (a newer day
   * wins within a version, a new version starts over).
   */
  async markSeeded(em: Em, name: string, version: number, day: string): Promise<void> {
    await sql(
      em,
      `insert into sandbox_fixtures (name, version, seeded_through) values ($1, $2, $3)
       on conflict (name) do update set version = excluded.version,
         seeded_through = greatest(excluded.seeded_through, case when sandbox_fixtures.version = excluded.version
                                   then sandbox_fixtures.seeded_through end)`,
      [name, version, day],
    );
  },
};
