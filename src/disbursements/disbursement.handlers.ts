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
import type { BooksService } from "../books/books.service.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { Disbursement, DisbursementService, Installment } from "./disbursement.service.ts";
import type { RepaymentService } from "./repayment.service.ts";

/** A disbursement in the contract's shape, with its schedule. */
export function toDisbursement(
  row: Disbursement,
  installments: { dueDate: string; amountKobo: bigint }[],
): MessageInitShape<typeof DisbursementSchema> {
  return {
    id: row.id,
    userId: row.userId,
    status: Disbursement_Status[row.status],
    principalKobo: row.principalKobo,
    feeKobo: row.feeKobo,
    feeRateBps: row.feeRateBps,
    destination: Disbursement_Destination[row.destination],
    reference: row.reference,
    repaymentSchedule: {
      installments: installments.map((i) => ({ dueDate: i.dueDate, amountKobo: i.amountKobo })),
    },
    scheduleAcceptedAt: row.scheduleAcceptedAt.toISOString(),
    failureReason: row.failureReason ?? "",
    createdAt: row.createdAt.toISOString(),
    deliveredAt: row.deliveredAt?.toISOString() ?? "",
    failedAt: row.failedAt?.toISOString() ?? "",
    reversedAt: row.reversedAt?.toISOString() ?? "",
  };
}

/** A repayment in the contract's shape. */
export function toRepayment(r: Installment): MessageInitShape<typeof RepaymentSchema> {
  return {
    id: r.id,
    disbursementId: r.disbursementId,
    seq: r.seq,
    dueDate: r.dueDate,
    amountKobo: r.amountKobo,
    status: Repayment_Status[r.status],
    attempts: r.attempts,
    nextAttemptAt: r.status === "SCHEDULED" ? (r.nextAttemptAt?.toISOString() ?? "") : "",
    lastFailure: r.lastFailure ?? "",
    collectedAt: r.collectedAt?.toISOString() ?? "",
  };
}

/** `partner.v1.DisbursementService`. */
export function createDisbursementHandlers(
  disbursements: DisbursementService,
  repayments: RepaymentService,
  books: BooksService,
): ServiceImpl<typeof DisbursementApi> {
  return {
    async listRepayments(req, ctx) {
      const rows = await repayments.list(emOf(ctx.values), req.disbursementId);
      return {
        repayments: rows.map(toRepayment),
        hasMore: false,
      };
    },
    async getBooks(req, ctx) {
      const b = await books.list(emOf(ctx.values), req.from, req.to);
      return {
        entries: b.entries.map((e) => ({
          kind: e.kind,
          amountKobo: e.amountKobo,
          disbursementId: e.disbursementId,
          repaymentId: e.installmentId ?? "",
          bookedAt: e.bookedAt.toISOString(),
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
        disbursement: toDisbursement(row, req.repaymentSchedule?.installments ?? []),
      };
    },
    async getDisbursement(req, ctx) {
      const { row, installments } = await disbursements.get(emOf(ctx.values), req.id);
      return { disbursement: toDisbursement(row, installments) };
    },
  };
}
