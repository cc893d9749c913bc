import type { ServiceImpl } from "@connectrpc/connect";
import {
  CollectRepaymentRequest_Outcome,
  type SandboxService as SandboxApi,
} from "../../gen/partner/v1/sandbox_pb.ts";
import { toConsent, toLink } from "../consent/consent.handlers.ts";
import { toDisbursement, toRepayment } from "../disbursements/disbursement.handlers.ts";
import type { DisbursementService } from "../disbursements/disbursement.service.ts";
import type { Em } from "../platform/db/orm.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { SandboxService } from "./sandbox.service.ts";

/** `partner.v1.SandboxService`. */
export function createSandboxHandlers(
  sandbox: SandboxService,
  disbursements: DisbursementService,
): ServiceImpl<typeof SandboxApi> {
  const disbursement = async (em: Em, id: string) => {
    return toDisbursement(await disbursements.get(em, id));
  };
  return {
    async acceptConsentLink(req, ctx) {
      return {
        consentLink: toLink(
          await sandbox.decideConsentLink(emOf(ctx.values), callerOf(ctx.values), req.id, true),
        ),
      };
    },
    async declineConsentLink(req, ctx) {
      return {
        consentLink: toLink(
          await sandbox.decideConsentLink(emOf(ctx.values), callerOf(ctx.values), req.id, false),
        ),
      };
    },
    async revokeConsentAsUser(req, ctx) {
      return {
        consent: toConsent(await sandbox.revokeConsentAsUser(emOf(ctx.values), callerOf(ctx.values), req.id)),
      };
    },
    async setStanding(req, ctx) {
      const r = await sandbox.setStanding(
        emOf(ctx.values),
        callerOf(ctx.values),
        req.userId,
        req.tier,
        req.score,
      );
      return { userId: req.userId, ...r };
    },
    async acceptDisbursement(req, ctx) {
      const em = emOf(ctx.values);
      await sandbox.decideMandate(em, callerOf(ctx.values), req.id, true);
      return { disbursement: await disbursement(em, req.id) };
    },
    async declineDisbursement(req, ctx) {
      const em = emOf(ctx.values);
      await sandbox.decideMandate(em, callerOf(ctx.values), req.id, false);
      return { disbursement: await disbursement(em, req.id) };
    },
    async failDisbursement(req, ctx) {
      const caller = callerOf(ctx.values);
      const em = emOf(ctx.values);
      await sandbox.failDisbursement(em, caller, req.id);
      return { disbursement: await disbursement(em, req.id) };
    },
    async reverseDisbursement(req, ctx) {
      const caller = callerOf(ctx.values);
      const em = emOf(ctx.values);
      await sandbox.reverseDisbursement(em, caller, req.id);
      return { disbursement: await disbursement(em, req.id) };
    },
    async resetSandbox(_req, ctx) {
      return sandbox.reset(emOf(ctx.values), callerOf(ctx.values));
    },
    async collectRepayment(req, ctx) {
      const outcome =
        req.outcome === CollectRepaymentRequest_Outcome.SUCCESS
          ? "SUCCESS"
          : req.outcome === CollectRepaymentRequest_Outcome.FAILURE
            ? "FAILURE"
            : undefined;
      const row = await sandbox.collectRepayment(
        emOf(ctx.values),
        callerOf(ctx.values),
        req.id,
        outcome,
        req.failureCode,
      );
      return { repayment: toRepayment(row) };
    },
  };
}
