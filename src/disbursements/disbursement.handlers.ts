import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { Authentication_Method } from "../../gen/partner/v1/consents_pb.ts";
import {
  Disbursement_Destination,
  Disbursement_Status,
  Disbursement_StatusSchema,
  type DisbursementService as DisbursementApi,
  type DisbursementSchema,
  Repayment_Refund_Status,
  Repayment_Status,
  type RepaymentSchema,
} from "../../gen/partner/v1/disbursements_pb.ts";
import { limitsOf } from "../limits/limits.context.ts";
import { callerOf, idempotentTxOf, replicaRead } from "../platform/rpc/context.ts";
import type { BooksService } from "./books.service.ts";
import type { Disbursement } from "./disbursement.entity.ts";
import type { DisbursementService, DisbursementView, Installment } from "./disbursement.service.ts";
import type { RepaymentService } from "./repayment.service.ts";

/** A disbursement in the contract's shape, with its schedule and, while unanswered, its mandate page. */
export function toDisbursement({
  row,
  installments,
  acceptanceUrl,
}: DisbursementView<{ dueDate: string; amountKobo: bigint }>): MessageInitShape<typeof DisbursementSchema> {
  const schedule = (list: { dueDate: string; amountKobo: bigint | string }[]) => ({
    installments: list.map((i) => ({ dueDate: i.dueDate, amountKobo: BigInt(i.amountKobo) })),
  });
  return {
    id: row.id,
    userId: row.userId,
    status: Disbursement_Status[row.status],
    principalKobo: row.principalKobo,
    feeKobo: row.feeKobo,
    feeRateBps: row.feeRateBps,
    destination: Disbursement_Destination[row.destination],
    reference: row.reference,
    repaymentSchedule: schedule(installments),
    scheduleAcceptedAt: row.scheduleAcceptedAt?.toISOString() ?? "",
    failureReason: row.failureReason ?? "",
    createdAt: row.createdAt.toISOString(),
    deliveredAt: row.deliveredAt?.toISOString() ?? "",
    failedAt: row.failedAt?.toISOString() ?? "",
    reversedAt: row.reversedAt?.toISOString() ?? "",
    acceptanceUrl,
    acceptanceExpiresAt: row.acceptanceExpiresAt?.toISOString() ?? "",
    acceptance:
      row.acceptanceMethod && row.scheduleAcceptedAt && row.acceptedSchedule
        ? {
            authentication: {
              method: Authentication_Method[row.acceptanceMethod],
              at: timestampFromDate(row.scheduleAcceptedAt),
            },
            acceptedAt: row.scheduleAcceptedAt.toISOString(),
            repaymentSchedule: schedule(row.acceptedSchedule),
            totalRepayableKobo: row.acceptedTotalKobo ?? 0n,
            principalKobo: row.principalKobo,
          }
        : undefined,
    cancelledAt: row.cancelledAt?.toISOString() ?? "",
    totalRepayableKobo: installments.reduce((sum, i) => sum + BigInt(i.amountKobo), 0n),
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
    refund: r.refundStatus
      ? {
          status: Repayment_Refund_Status[r.refundStatus],
          amountKobo: r.amountKobo,
          refundedAt: r.refundedAt?.toISOString() ?? "",
          failureReason: r.refundFailure ?? "",
        }
      : undefined,
  };
}

/** `partner.v1.DisbursementService`. */
export function createDisbursementHandlers(
  disbursements: DisbursementService,
  repayments: RepaymentService,
  books: BooksService,
): ServiceImpl<typeof DisbursementApi> {
  return {
    async listDisbursements(req, ctx) {
      const status = req.status
        ? (Disbursement_StatusSchema.value[req.status]?.name as Disbursement["status"])
        : undefined;
      const page = await replicaRead(ctx.values, (em) =>
        disbursements.list(
          em,
          { status, userId: req.userId || undefined },
          { limit: req.limit, startingAfter: req.startingAfter },
        ),
      );
      return { disbursements: page.items.map(toDisbursement), hasMore: page.hasMore };
    },
    async getBooksSeries(req, ctx) {
      return { days: await replicaRead(ctx.values, (em) => books.series(em, req.from, req.to)) };
    },
    async listRepayments(req, ctx) {
      const rows = await replicaRead(ctx.values, (em) => repayments.list(em, req.disbursementId));
      return { repayments: rows.map(toRepayment), hasMore: false };
    },
    async getBooks(req, ctx) {
      const b = await replicaRead(ctx.values, (em) =>
        books.list(em, req.from, req.to, { limit: req.limit, startingAfter: req.startingAfter }),
      );
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
        refundsKobo: b.refundsKobo,
        hasMore: b.hasMore,
        nextStartingAfter: b.nextStartingAfter,
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
      // Never without a key to retry it safely with (CONTRACT.md §6): 400 idempotency_key_required.
      const view = await disbursements.create(
        idempotentTxOf(ctx.values),
        caller,
        {
          userId: req.userId,
          principalKobo: req.principalKobo,
          destination,
          reference: req.reference,
          installments: (req.repaymentSchedule?.installments ?? []).map((i) => ({
            dueDate: i.dueDate,
            amountKobo: i.amountKobo,
          })),
          acceptanceExpiresInHours: req.acceptanceExpiresInHours,
        },
        limitsOf(ctx.values).disbursementsPerUserPerDay,
      );
      return { disbursement: toDisbursement(view) };
    },
    async getDisbursement(req, ctx) {
      return {
        disbursement: toDisbursement(await replicaRead(ctx.values, (em) => disbursements.get(em, req.id))),
      };
    },
  };
}
