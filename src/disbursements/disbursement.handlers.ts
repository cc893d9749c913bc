import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  Disbursement_Destination,
  Disbursement_Status,
  type DisbursementService as DisbursementApi,
  type DisbursementSchema,
  Repayment_Status,
  type RepaymentSchema,
} from "../../gen/partner/v1/disbursements_pb.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { DisbursementRow, DisbursementService } from "./disbursement.service.ts";
import type { RepaymentRow, RepaymentService } from "./repayment.service.ts";

export function toDisbursement(
  row: DisbursementRow,
  installments: { due_date: string; amount_kobo: string }[],
): MessageInitShape<typeof DisbursementSchema> {
  return {
    id: row.id,
    userId: row.user_id,
    status: Disbursement_Status[row.status],
    principalKobo: BigInt(row.principal_kobo),
    feeKobo: BigInt(row.fee_kobo),
    feeRateBps: row.fee_rate_bps,
    destination: Disbursement_Destination[row.destination],
    reference: row.reference,
    repaymentSchedule: {
      installments: installments.map((i) => ({ dueDate: i.due_date, amountKobo: BigInt(i.amount_kobo) })),
    },
    scheduleAcceptedAt: row.schedule_accepted_at.toISOString(),
    failureReason: row.failure_reason ?? "",
    createdAt: row.created_at.toISOString(),
    deliveredAt: row.delivered_at?.toISOString() ?? "",
    failedAt: row.failed_at?.toISOString() ?? "",
    reversedAt: row.reversed_at?.toISOString() ?? "",
  };
}

/** A repayment in the contract's shape. */
export function toRepayment(r: RepaymentRow): MessageInitShape<typeof RepaymentSchema> {
  return {
    id: r.id,
    disbursementId: r.disbursement_id,
    seq: r.seq,
    dueDate: r.due_date,
    amountKobo: BigInt(r.amount_kobo),
    status: Repayment_Status[r.status],
    attempts: r.attempts,
    nextAttemptAt: r.status === "SCHEDULED" ? (r.next_attempt_at?.toISOString() ?? "") : "",
    lastFailure: r.last_failure ?? "",
    collectedAt: r.collected_at?.toISOString() ?? "",
  };
}

/** `partner.v1.DisbursementService`. */
export function createDisbursementHandlers(
  disbursements: DisbursementService,
  repayments: RepaymentService,
): ServiceImpl<typeof DisbursementApi> {
  return {
    async listRepayments(req, ctx) {
      const rows = await repayments.list(emOf(ctx.values), callerOf(ctx.values), req.disbursementId);
      return {
        repayments: rows.map(toRepayment),
        hasMore: false,
      };
    },
    async getBooks(req, ctx) {
      const b = await repayments.books(emOf(ctx.values), callerOf(ctx.values), req.from, req.to);
      return {
        entries: b.entries.map((e) => ({
          kind: e.kind,
          amountKobo: BigInt(e.amount_kobo),
          disbursementId: e.disbursement_id,
          repaymentId: e.installment_id ?? "",
          bookedAt: e.booked_at.toISOString(),
        })),
        principalOutKobo: b.principalOutKobo,
        feesKobo: b.feesKobo,
        repaymentsInKobo: b.repaymentsInKobo,
        netKobo: b.netKobo,
      };
    },
    async createDisbursement(req, ctx) {
      const caller = callerOf(ctx.values);
      const destination =
        req.destination === Disbursement_Destination.WALLET
          ? "WALLET"
          : req.destination === Disbursement_Destination.BANK
            ? "BANK"
            : undefined;
      const row = await disbursements.create(emOf(ctx.values), caller, {
        userId: req.userId,
        principalKobo: req.principalKobo,
        destination,
        reference: req.reference,
        installments: (req.repaymentSchedule?.installments ?? []).map((i) => ({
          dueDate: i.dueDate,
          amountKobo: i.amountKobo,
        })),
        scheduleAcceptedAt: req.scheduleAcceptedAt,
      });
      return {
        disbursement: toDisbursement(
          row,
          (req.repaymentSchedule?.installments ?? []).map((i) => ({
            due_date: i.dueDate,
            amount_kobo: i.amountKobo.toString(),
          })),
        ),
      };
    },
    async getDisbursement(req, ctx) {
      const { row, installments } = await disbursements.get(emOf(ctx.values), callerOf(ctx.values), req.id);
      return { disbursement: toDisbursement(row, installments) };
    },
  };
}
