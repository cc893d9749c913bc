import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { tenantFilter } from "../platform/tenancy.ts";
import { UserEntity } from "../users/user.entity.ts";

/**
 * A sandbox partner's own re-score of a sandbox user (the standing helper): the partner's copy of the user
 * (CONTRACT.md §7). Its snapshots show this tier and score over the platform's; no other partner sees it.
 */
export const SandboxStandingEntity = defineEntity({
  name: "SandboxStanding",
  tableName: "sandbox_standings",
  filters: tenantFilter,
  properties: {
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .primary()
        .fieldName("partner_id")
        .foreignKeyName("sandbox_standings_partner_id_fkey")
        .deleteRule("no action")
        .updateRule("no action"),
    /** Always `sandbox`: the column the tenancy filter reads, as on every partner-owned row. */
    environment: p.enum(["sandbox"] as const),
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("sandbox_standings_user_id_fkey")
        .deleteRule("no action")
        .updateRule("no action"),
    tier: p.enum(["Unrated", "Emerging", "Established", "Trusted"] as const),
    /** 0 to 1000. */
    score: p.integer(),
    updatedAt: p.datetime(),
  },
  checks: [{ name: "sandbox_standings_score_check", expression: "score >= 0 and score <= 1000" }],
});

/** A sandbox standing row. */
export type SandboxStanding = InferEntity<typeof SandboxStandingEntity>;
