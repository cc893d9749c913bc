import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { type IngestService, LedgerEntry_Direction } from "../../gen/internal/v1/ingest_pb.ts";
import type { SnapshotService as SnapshotApi } from "../../gen/partner/v1/snapshots_pb.ts";
import type { LedgerService } from "../ledger/ledger.service.ts";
import { validationFailed } from "../platform/errors.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { StandingService } from "../standing/standing.service.ts";
import type { SnapshotService } from "./snapshot.service.ts";

const encoder = new TextEncoder();

/** `partner.v1.SnapshotService`: the signed document as an HttpBody, the same bytes on every face. */
export function createSnapshotHandlers(snapshots: SnapshotService): ServiceImpl<typeof SnapshotApi> {
  return {
    async getSnapshot(req, ctx) {
      const body = await snapshots.read(
        emOf(ctx.values),
        callerOf(ctx.values),
        req.userId,
        req.ledgerWindowDays,
      );
      ctx.responseHeader.set("cache-control", "no-store");
      return { contentType: "application/json", data: encoder.encode(body) };
    },
  };
}

/** `internal.v1.IngestService`: the platform's data. */
export function createIngestHandlers(
  ledger: LedgerService,
  standing: StandingService,
): ServiceImpl<typeof IngestService> {
  return {
    async ingestLedgerEntries(req, ctx) {
      return ledger.ingest(
        emOf(ctx.values),
        req.entries.map((e, i) => {
          if (e.direction === LedgerEntry_Direction.DIRECTION_UNSPECIFIED) {
            throw validationFailed({ [`entries[${i}].direction`]: "must be INFLOW or OUTFLOW" });
          }
          if (!e.occurredAt) throw validationFailed({ [`entries[${i}].occurredAt`]: "is required" });
          return {
            id: e.id,
            userId: e.userId,
            amountKobo: e.amountKobo,
            direction: e.direction === LedgerEntry_Direction.INFLOW ? "IN" : "OUT",
            counterpartyId: e.counterpartyId,
            channel: e.channel,
            occurredAt: timestampDate(e.occurredAt),
          };
        }),
      );
    },
    async upsertStanding(req, ctx) {
      return standing.upsertStanding(
        emOf(ctx.values),
        req.updates.map((u, i) => {
          if (!u.asOf) throw validationFailed({ [`updates[${i}].asOf`]: "is required" });
          return {
            userId: u.userId,
            tier: u.tier,
            score: u.score,
            scoreVersion: u.scoreVersion,
            standingSignals: {
              tenureDays: u.tenureDays ?? null,
              monthsInTier: u.monthsInTier ?? null,
              scoreChange90d: u.scoreChange90d ?? null,
              disputesLast90d: u.disputesLast90d ?? null,
            },
            workSignals: {
              monthsActive: u.monthsActive ?? null,
              activeDaysLast30d: u.activeDaysLast30d ?? null,
              incomeRegularityBps: u.incomeRegularityBps ?? null,
              employmentVerified: u.employmentVerified ?? null,
            },
            asOf: timestampDate(u.asOf),
          };
        }),
      );
    },
    async upsertKyc(req, ctx) {
      const updated = await standing.upsertKyc(
        emOf(ctx.values),
        req.updates.map((u) => ({
          userId: u.userId,
          level: u.level,
          bvnVerified: u.bvnVerified,
          ninVerified: u.ninVerified,
          phoneVerified: u.phoneVerified,
          addressVerified: u.addressVerified,
          livenessChecked: u.livenessChecked,
          verifiedAt: u.verifiedAt ? timestampDate(u.verifiedAt) : null,
        })),
      );
      return { updated };
    },
  };
}
