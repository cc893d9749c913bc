import type { ApiKeyService } from "../apikeys/api-key.service.ts";
import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { ChangeFeed } from "../platform/db/change-feed.ts";
import type { Em, LazyEm } from "../platform/db/orm.ts";
import { type Caller, type Environment, environments } from "../platform/tenancy.ts";
import { bucketChanged, settleBucket } from "../ratelimit/limiters.service.ts";
import { limitOverrideRepository as repo, type StoredOverride } from "./limit-override.repository.ts";
import {
  applyChange,
  checkChange,
  type LimitChange,
  type LimitOverrides,
  type Limits,
  resolveLimits,
} from "./limits.ts";

/** The limits as the internal API carries them, for the handlers of the methods that read and change them. */

/** One key's own overrides and what it gets. */
export interface KeyLimitsView {
  keyId: string;
  partnerId: string;
  environment: Environment;
  overrides: LimitOverrides;
  effective: Limits;
}

/** A partner's overrides in one environment, what its keys get, and its keys' own overrides. */
export interface PartnerLimitsView {
  partnerId: string;
  environment: Environment;
  overrides: LimitOverrides;
  effective: Limits;
  keys: KeyLimitsView[];
}

/** Options for {@link createLimitsService}. */
export interface LimitsServiceOptions {
  /** The service's defaults (RATE_LIMIT_READ, RATE_LIMIT_WRITE and the limits on expensive work). */
  defaults: Limits;
  clock: Clock;
  changes: ChangeFeed;
  partners: PartnerService;
  apiKeys: ApiKeyService;
}

/** What {@link createLimitsService} returns. */
export type LimitsService = ReturnType<typeof createLimitsService>;

/** A safety net only: a change reaches every instance at once through the change feed. */
const CACHE_MS = 60 * ms.second;
const CACHE_MAX = 50_000;

/** A partner's limits in one environment, and its keys', from its stored overrides. */
function partnerView(
  defaults: Limits,
  stored: StoredOverride[],
  partnerId: string,
  environment: Environment,
): PartnerLimitsView {
  const own = stored.find((s) => s.environment === environment && s.keyId === "")?.overrides ?? {};
  const keys = stored
    .filter((s) => s.environment === environment && s.keyId !== "")
    .map((s) => ({
      keyId: s.keyId,
      partnerId,
      environment,
      overrides: s.overrides,
      effective: resolveLimits(defaults, own, s.overrides),
    }));
  return { partnerId, environment, overrides: own, effective: resolveLimits(defaults, own), keys };
}

/** A partner's overrides in one environment and its keys' own, before or after a change. */
interface OverridesAt {
  partner: LimitOverrides;
  keys: Map<string, LimitOverrides>;
}

/** Moves the shared buckets of `keyIds` whose limits a change alters, from `before` it to `after`. */
async function settleBuckets(
  defaults: Limits,
  tx: Em,
  keyIds: string[],
  before: OverridesAt,
  after: OverridesAt,
) {
  for (const keyId of keyIds) {
    const was = resolveLimits(defaults, before.partner, before.keys.get(keyId));
    const now = resolveLimits(defaults, after.partner, after.keys.get(keyId));
    for (const cls of ["read", "write"] as const)
      if (bucketChanged(was[cls], now[cls])) await settleBucket(tx, `${cls}:${keyId}`, was[cls], now[cls]);
  }
}

/** Applies a change at one level in one transaction: lock, write, settle the buckets, announce. */
async function applyLimitChange(
  { defaults, clock, changes, apiKeys }: LimitsServiceOptions,
  em: Em,
  target: { partnerId: string; environment: Environment; keyId: string },
  c: LimitChange,
): Promise<PartnerLimitsView> {
  const reset = checkChange(c, target.keyId ? "key" : "partner");
  const { partnerId, environment, keyId } = target;
  const result = await em.transactional(async (tx) => {
    await repo.lock(tx, partnerId);
    const stored = (await repo.forPartner(tx, partnerId)).filter((s) => s.environment === environment);
    const keys = new Map(stored.filter((s) => s.keyId).map((s) => [s.keyId, s.overrides]));
    const partner = stored.find((s) => s.keyId === "")?.overrides ?? {};
    const current = keyId ? (keys.get(keyId) ?? {}) : partner;
    const next = applyChange(current, c.set, reset);
    await repo.save(tx, partnerId, environment, keyId, next, clock.now());
    const afterKeys = new Map(keys);
    if (keyId) afterKeys.set(keyId, next);
    const affected = keyId
      ? [keyId]
      : (await apiKeys.list(tx, partnerId)).filter((k) => k.environment === environment).map((k) => k.id);
    const after = { partner: keyId ? partner : next, keys: afterKeys };
    await settleBuckets(defaults, tx, affected, { partner, keys }, after);
    await repo.announce(tx, partnerId);
    return partnerView(defaults, await repo.forPartner(tx, partnerId), partnerId, environment);
  });
  // This instance at once; the others when the NOTIFY reaches them, a moment later.
  changes.emitLocal("limits", partnerId);
  return result;
}

/**
 * The lookup of a caller's key's limits, over this instance's cache of them: the change feed drops a partner's
 * cached limits when they change, and everything when it may have missed a message.
 */
function createCallerLimits({ defaults, changes }: Pick<LimitsServiceOptions, "defaults" | "changes">) {
  const cache = new Map<string, { partnerId: string; limits: Limits; at: number }>();
  // Bumped by every change: a lookup that raced with one does not cache what it read before it.
  let generation = 0;
  changes.subscribe("limits", (partnerId) => {
    generation++;
    if (partnerId === "*") return cache.clear();
    for (const [keyId, entry] of cache) if (entry.partnerId === partnerId) cache.delete(keyId);
  });
  return async (em: LazyEm, caller: Caller): Promise<Limits> => {
    const hit = cache.get(caller.keyId);
    const nowMs = Date.now();
    if (hit && changes.healthy && nowMs - hit.at < CACHE_MS) return hit.limits;
    const seen = generation;
    const found = await repo.forKey(em(), caller.partnerId, caller.environment, caller.keyId);
    const limits = resolveLimits(defaults, found.partner, found.key);
    if (changes.healthy && seen === generation) {
      if (cache.size >= CACHE_MAX) cache.clear();
      cache.set(caller.keyId, { partnerId: caller.partnerId, limits, at: nowMs });
    }
    return limits;
  };
}

/**
 * Dedicated capacity (CONTRACT.md §8): the operator's per-partner and per-key overrides of the limits, and the
 * limits each key gets. A key's limits are cached on each instance, so the edge pays no query for them; a change
 * announces itself on the change feed in the transaction that makes it, and every instance drops that partner's
 * cached limits when it commits (or everything, when the feed may have missed a message).
 */
export function createLimitsService(o: LimitsServiceOptions) {
  const { defaults, partners, apiKeys } = o;
  return {
    /**
     * The limits of a caller's key, from this instance's cache when the change feed vouches for it. On a miss
     * `em()` (the request's unit of work, or a transaction it is in) reads both levels in one query.
     */
    forCaller: createCallerLimits(o),

    /** A partner's limits in each environment (sandbox, then production), or `not_found`. */
    async forPartner(em: Em, partnerId: string): Promise<PartnerLimitsView[]> {
      await partners.get(em, partnerId);
      const stored = await repo.forPartner(em, partnerId);
      return environments.map((environment) => partnerView(defaults, stored, partnerId, environment));
    },

    /** Sets or resets a partner's overrides in one environment; `not_found` for an unknown partner. */
    async setForPartner(
      em: Em,
      partnerId: string,
      environment: Environment,
      c: LimitChange,
    ): Promise<PartnerLimitsView> {
      checkChange(c, "partner");
      await partners.get(em, partnerId);
      return applyLimitChange(o, em, { partnerId, environment, keyId: "" }, c);
    },

    /** Sets or resets one key's own buckets; `not_found` for an unknown key. */
    async setForKey(em: Em, keyId: string, c: LimitChange): Promise<KeyLimitsView> {
      checkChange(c, "key");
      const key = await apiKeys.get(em, keyId);
      const target = { partnerId: key.partnerId, environment: key.environment, keyId };
      const partner = await applyLimitChange(o, em, target, c);
      return (
        partner.keys.find((k) => k.keyId === keyId) ?? {
          keyId,
          partnerId: key.partnerId,
          environment: key.environment,
          overrides: {},
          effective: partner.effective,
        }
      );
    },
  };
}
