import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Logger } from "../platform/logger.ts";
import type { Outbox } from "./outbox.ts";
import { nextAttemptAt, parseRetryAfter } from "./schedule.ts";
import type { AttemptResult, Sender } from "./sender.ts";
import { signatureHeaders } from "./signature.ts";
import { type ClaimedDelivery as Claimed, webhookRepository as repo } from "./webhook.repository.ts";

/** Options for {@link createDeliveryWorker}. */
export interface DeliveryWorkerOptions {
  clock: Clock;
  box: SecretBox;
  sender: Sender;
  outbox: Outbox;
  logger: Logger;
  /** How long a claimed delivery is held by one worker; past it, another may take it over. */
  leaseMs: number;
  /** How overdue a delivery must be before the sweeper re-queues it. */
  sweepGraceMs: number;
  /** Called once per attempt with the event-to-attempt delay (first attempts only) and the outcome. */
  onAttempt?: (a: {
    firstAttempt: boolean;
    sinceCreatedMs: number;
    ok: boolean;
    latencyMs: number;
    outcome: "delivered" | "retrying" | "given_up";
  }) => void;
}

interface Outcome {
  delivery: Claimed;
  result: AttemptResult;
  startedAt: Date;
}

/** A secret box AAD that binds a subscription's secret to it. */
export const secretAad = (webhookId: string) => `webhook-secret:${webhookId}`;

/** Sends due deliveries and records what happened; the delivery row is the truth, jobs only wake it. */
export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;

/** Creates the delivery worker. */
export function createDeliveryWorker(o: DeliveryWorkerOptions) {
  const { clock, box, sender, outbox, logger } = o;
  const secrets = new Map<string, { enc: Buffer; secret: string }>();
  const open = (webhookId: string, enc: Buffer): string => {
    const hit = secrets.get(`${webhookId}:${enc.toString("base64")}`);
    if (hit) return hit.secret;
    const secret = box.open(enc, secretAad(webhookId)).toString("utf8");
    if (secrets.size > 10_000) secrets.clear();
    secrets.set(`${webhookId}:${enc.toString("base64")}`, { enc, secret });
    return secret;
  };

  /** Takes the deliveries that are due and not held by another worker, for one attempt each. */
  const claim = (em: Em, ids: string[], now: Date): Promise<Claimed[]> =>
    repo.claimDeliveries(em, ids, now, o.leaseMs);

  const attempt = async (d: Claimed, now: Date): Promise<Outcome> => {
    const list = [open(d.webhook_id, d.secret_enc)];
    if (d.previous_secret_enc && d.previous_secret_expires_at && d.previous_secret_expires_at > now) {
      list.push(open(d.webhook_id, d.previous_secret_enc));
    }
    const headers = signatureHeaders({
      eventId: d.event_id,
      deliveryId: d.id,
      body: d.body,
      secrets: list,
      timestamp: Math.floor(now.getTime() / 1000),
    });
    const startedAt = now;
    const result = await sender.post(d.url, d.body, headers);
    return { delivery: d, result, startedAt };
  };

  /** Writes every attempt and the deliveries' new states in one transaction, with the retry wake-ups. */
  const record = async (em: Em, outcomes: Outcome[], abandoned: Claimed[]) => {
    const now = clock.now();
    const rows = outcomes.map(({ delivery: d, result: r, startedAt }) => {
      const attempts = d.attempts + 1;
      const gone = r.statusCode === 410;
      const next =
        r.ok || gone
          ? undefined
          : nextAttemptAt({
              attempts,
              now,
              createdAt: d.created_at,
              retryAfterSeconds:
                r.statusCode === 429 || r.statusCode === 503 ? parseRetryAfter(r.retryAfter, now) : undefined,
            });
      const status = r.ok ? "DELIVERED" : next ? "FAILED" : "GIVEN_UP";
      return { d, r, startedAt, attempts, gone, next, status };
    });
    await em.transactional(async (tx) => {
      await repo.recordAttempts(tx, rows, now);
      // 410 Gone: the subscription is disabled and nothing more is sent to it.
      const gone = [...new Set(rows.filter((x) => x.gone).map((x) => x.d.webhook_id))];
      await repo.disableWebhooks(tx, gone, "the endpoint answered 410 Gone", now);
      await repo.giveUpDeliveries(tx, [...gone, ...abandoned.map((d) => d.webhook_id)], now);
      await outbox.enqueue(
        tx,
        rows
          .filter((x) => x.next)
          .map((x) => ({
            id: x.d.id,
            // Wake-ups run on the database clock: schedule the same delay from it.
            startAfter: new Date(Date.now() + ((x.next as Date).getTime() - now.getTime())),
          })),
      );
    });
    return rows;
  };

  return {
    /**
     * Makes one attempt for each due delivery among `ids`; the others are left alone. No transaction is
     * open while the endpoints are called: the claim commits first, the outcomes are recorded after.
     */
    async processBatch(em: Em, ids: string[]): Promise<number> {
      const now = clock.now();
      const claimed = await claim(em, ids, now);
      if (claimed.length === 0) return 0;
      const live = claimed.filter((d) => d.webhook_status === "ACTIVE" && !d.deleted_at);
      const abandoned = claimed.filter((d) => !live.includes(d));
      const outcomes = await Promise.all(live.map((d) => attempt(d, now)));
      const recorded = await record(em, outcomes, abandoned);
      for (const { d: delivery, r: result, status } of recorded) {
        o.onAttempt?.({
          firstAttempt: delivery.attempts === 0,
          sinceCreatedMs: now.getTime() - delivery.created_at.getTime(),
          ok: result.ok,
          latencyMs: result.latencyMs,
          outcome: status === "DELIVERED" ? "delivered" : status === "FAILED" ? "retrying" : "given_up",
        });
      }
      return outcomes.length;
    },

    /**
     * Re-queues deliveries that are overdue and held by no worker (their wake-up was lost, or the worker
     * holding them died). One sweeper runs at a time across all instances.
     */
    async sweep(em: Em, limit = 1_000): Promise<number> {
      return em.transactional(async (tx) => {
        // One sweeper at a time across all instances.
        if (!(await repo.tryLockSweeper(tx))) return 0;
        const due = await repo.overdueDeliveries(tx, clock.now(), o.sweepGraceMs, limit);
        await outbox.enqueue(
          tx,
          due.map((id) => ({ id })),
        );
        if (due.length > 0) logger.info("re-queued overdue webhook deliveries", { count: due.length });
        return due.length;
      });
    },
  };
}
