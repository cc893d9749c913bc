import type { ServiceImpl } from "@connectrpc/connect";
import type { SandboxAdminService } from "../../gen/internal/v1/sandbox_admin_pb.ts";
import type { PartnerService } from "../partners/partner.service.ts";
import { emOf } from "../platform/rpc/context.ts";
import type { createSandboxFixtures } from "./fixtures.ts";
import type { SandboxService } from "./sandbox.service.ts";

/** `internal.v1.SandboxAdminService`: the operator's `sandbox seed [--partner P]`. */
export function createSandboxAdminHandlers(
  sandbox: SandboxService,
  fixtures: ReturnType<typeof createSandboxFixtures>,
  partners: PartnerService,
): ServiceImpl<typeof SandboxAdminService> {
  return {
    async seedSandbox(req, ctx) {
      const em = emOf(ctx.values);
      // An unknown partner is 404 before anything is written.
      if (req.partnerId) await partners.get(em, req.partnerId);
      const seeded = await fixtures.reseed(em);
      const reset = req.partnerId ? await sandbox.resetPartner(em, req.partnerId) : undefined;
      return {
        users: seeded.users,
        ledgerDays: seeded.days,
        partnerId: req.partnerId,
        consents: reset?.consents ?? 0,
        consentLinks: reset?.consentLinks ?? 0,
        disbursements: reset?.disbursements ?? 0,
        standings: reset?.standings ?? 0,
        ledgerEntries: reset?.ledgerEntries ?? 0,
      };
    },
  };
}
