import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { type IngestService, LedgerEntry_Direction } from "../../gen/internal/v1/ingest_pb.ts";
import type { SnapshotService as SnapshotApi } from "../../gen/partner/v1/snapshots_pb.ts";
import type { LedgerService } from "../ledger/ledger.service.ts";
import { limitsOf } from "../limits/limits.context.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import type { Metrics } from "../platform/metrics.ts";
import { callerOf, emOf, replicaReadAt } from "../platform/rpc/context.ts";
import type { ConcurrencyLimiter } from "../ratelimit/limiters.service.ts";
import type { StandingService } from "../standing/standing.service.ts";
import type { SnapshotService } from "./snapshot.service.ts";

const encoder = new TextEncoder();

/**
 * `partner.v1.SnapshotService`: the signed document as an HttpBody, the same bytes on every face. A snapshot is
 * the most expensive read, so each API key may have at most its partner's `snapshotConcurrency` (by default
 * `reads.limit`) in flight on this instance (past it,
 * 429 `too_many_concurrent_reads`, refused before any query). The slot is held until the read's work ends,
 * whatever the outcome (a refusal, an error, a client gone meanwhile), and given back in `finally`.
 */
export function createSnapshotHandlers(
  snapshots: SnapshotService,
  reads: ConcurrencyLimiter,
  metrics?: Metrics,
): ServiceImpl<typeof SnapshotApi> {
  return {
    async getSnapshot(req, ctx) {
      const caller = callerOf(ctx.values);
      const limit = limitsOf(ctx.values).snapshotConcurrency;
      const release = reads.tryAcquire(caller.keyId, limit);
      if (!release) {
        metrics?.expensiveLimitRejections.inc({ limit: "snapshot_concurrency" });
        throw new ApiError("too_many_concurrent_reads", undefined, {
          retryAfterSeconds: 1,
          details: { limit },
        });
      }
      try {
        const body = await snapshots.read(
          emOf(ctx.values),
          (fn) => replicaReadAt(ctx.values, fn),
          caller,
          req.userId,
          req.ledgerWindowDays,
        );
        ctx.responseHeader.set("cache-control", "no-store");
        return { contentType: "application/json", data: encoder.encode(body) };
      } finally {
        release();
      }
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
    rebuildLedgerRollups: (req, ctx) => ledger.rebuildRollups(emOf(ctx.values), req.userIds),
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
