import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Partner, PartnerEntity } from "./partner.entity.ts";

/** The partners feature's table (partners): the only code that reads or writes it. */
export const partnerRepository = {
  find(em: Em, id: string): Promise<Partner | null> {
    return em.findOne(PartnerEntity, { id });
  },

  /** A partner's fee rate and caps. Raw: they are read on every disbursement create, a hot path. */
  async lendingTerms(
    em: Em,
    id: string,
  ): Promise<{ feeRateBps: number; maxCostBps: number; maxTenorDays: number } | undefined> {
    const [row] = await sql<{ fee_rate_bps: number; max_cost_bps: number; max_tenor_days: number }>(
      em,
      "select fee_rate_bps, max_cost_bps, max_tenor_days from partners where id = $1",
      [id],
    );
    return (
      row && { feeRateBps: row.fee_rate_bps, maxCostBps: row.max_cost_bps, maxTenorDays: row.max_tenor_days }
    );
  },

  /** Every partner but `except`, oldest first. */
  list(em: Em, except: string): Promise<Partner[]> {
    return em.find(PartnerEntity, { id: { $ne: except } }, { orderBy: { createdAt: "asc", id: "asc" } });
  },

  /** Names by id. */
  async names(em: Em, ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await em.find(PartnerEntity, { id: { $in: ids } }, { fields: ["id", "name"] });
    return new Map(rows.map((r) => [r.id, r.name]));
  },

  async insert(em: Em, row: Partner): Promise<Partner> {
    const partner = em.create(PartnerEntity, row);
    await em.flush();
    return partner;
  },

  /** Inserts unless a partner with that id exists. */
  async insertIfMissing(em: Em, row: Partner): Promise<void> {
    await em.upsert(PartnerEntity, row, { onConflictAction: "ignore" });
  },

  /** Writes the changes made to loaded partners. */
  save(em: Em): Promise<void> {
    return em.flush();
  },
};
