import type { KeyObject } from "node:crypto";
import type { Clock } from "../platform/clock.ts";
import { generateEd25519, privateKeyFromPkcs8 } from "../platform/crypto/ed25519.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { ChangeFeed } from "../platform/db/change-feed.ts";
import type { Em, LazyEm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { ulid } from "../platform/ids.ts";
import type { Environment } from "../platform/tenancy.ts";
import {
  type KeyStatus,
  keyStatus,
  nextQuarterStart,
  publicationOrder,
  rotationSchedule,
} from "./schedule.ts";
import type { SigningKeyRow } from "./signing-key.entity.ts";
import { signingKeyRepository as repo } from "./signing-key.repository.ts";

/** Binds a sealed private key to its kid. */
export const signingKeyAad = (kid: string) => `signing-key:${kid}`;

/** Both environments, each with its own keys (SPEC.md rule 4). */
export const environments: readonly Environment[] = ["sandbox", "production"];

/** A signing key as published: public parts and its status at the time asked. */
export interface PublishedKey {
  kid: string;
  environment: Environment;
  publicKey: Buffer;
  status: Exclude<KeyStatus, "RETIRED">;
  notBefore: Date;
  notAfter: Date;
}

/** The key that signs now, ready to use. */
export interface Signer {
  kid: string;
  environment: Environment;
  key: KeyObject;
}

/** Options for {@link createSigningKeyService}. */
export interface SigningKeyServiceOptions {
  clock: Clock;
  box: SecretBox;
  changes: ChangeFeed;
}

/** What {@link createSigningKeyService} returns. */
export type SigningKeyService = ReturnType<typeof createSigningKeyService>;

const CACHE_MS = 60_000;

/** One stored signing key's sealed private half, if any: the start-up check that MASTER_KEY opens this database. */
export async function sealedSigningKeySample(em: Em): Promise<{ sealed: Buffer; aad: string } | undefined> {
  const row = await repo.any(em);
  return row && { sealed: row.privateKeyEnc, aad: signingKeyAad(row.kid) };
}

/** A new key pair for `environment`, its private half sealed to its kid. */
function newKey(
  { clock, box }: SigningKeyServiceOptions,
  environment: Environment,
  notBefore: Date,
  retiresAt: Date,
): SigningKeyRow {
  const kid = `${environment === "production" ? "live" : "sandbox"}_${ulid(notBefore.getTime())}`;
  const pair = generateEd25519();
  return {
    kid,
    environment,
    publicKey: pair.publicKey,
    privateKeyEnc: box.seal(pair.privateKeyPkcs8, signingKeyAad(kid)),
    notBefore,
    retiresAt,
    notAfter: new Date(retiresAt.getTime() + rotationSchedule.keepAfterMs),
    createdAt: clock.now(),
  };
}

/** Runs `fn` in a transaction holding the environment's advisory lock. */
function locked<T>(em: Em, environment: Environment, fn: (em: Em, rows: SigningKeyRow[]) => Promise<T>) {
  return em.transactional(async (em) => {
    await repo.lockEnvironment(em, environment);
    const result = await fn(em, await repo.list(em, environment));
    await repo.saveAndAnnounce(em, environment);
    return result;
  });
}

/** The keys of `rows` a verifier may meet at `now`, ACTIVE first. */
function publicationOf(rows: SigningKeyRow[], now: Date): PublishedKey[] {
  return publicationOrder(
    rows
      .map((r) => ({ row: r, status: keyStatus(r, now), notBefore: r.notBefore }))
      .filter((k) => k.status !== "RETIRED"),
  ).map(({ row, status }) => ({
    kid: row.kid,
    environment: row.environment,
    publicKey: row.publicKey,
    status: status as PublishedKey["status"],
    notBefore: row.notBefore,
    notAfter: row.notAfter,
  }));
}

/** See {@link createSigningKeyService}'s `maintain`. */
async function maintainKeys(o: SigningKeyServiceOptions, em: Em): Promise<string[]> {
  const created: string[] = [];
  for (const environment of environments) {
    await locked(em, environment, async (em, rows) => {
      const now = o.clock.now();
      const turn = nextQuarterStart(now);
      if (!rows.some((r) => keyStatus(r, now) === "ACTIVE")) {
        const row = newKey(o, environment, now, turn);
        repo.add(em, row);
        created.push(row.kid);
      }
      const due = now.getTime() >= turn.getTime() - rotationSchedule.publishAheadMs;
      if (due && !rows.some((r) => r.notBefore.getTime() === turn.getTime())) {
        const row = newKey(o, environment, turn, nextQuarterStart(turn));
        repo.add(em, row);
        created.push(row.kid);
      }
    });
    o.changes.emitLocal("signing_keys", environment);
  }
  return created;
}

/** See {@link createSigningKeyService}'s `rotate`. */
async function rotateKey(o: SigningKeyServiceOptions, em: Em, environment: Environment): Promise<string> {
  const kid = await locked(em, environment, async (em, rows) => {
    const now = o.clock.now();
    const current = rows.find((r) => keyStatus(r, now) === "ACTIVE");
    const retiresAt = current?.retiresAt ?? nextQuarterStart(now);
    if (current) {
      current.retiresAt = new Date(Math.max(now.getTime(), current.notBefore.getTime() + 1));
      current.notAfter = new Date(current.retiresAt.getTime() + rotationSchedule.keepAfterMs);
    }
    const row = newKey(o, environment, new Date(current ? current.retiresAt : now), retiresAt);
    repo.add(em, row);
    return row.kid;
  });
  o.changes.emitLocal("signing_keys", environment);
  return kid;
}

/**
 * Keeps each environment's Ed25519 keys on the quarterly schedule and publishes them (CONTRACT.md §3).
 * Private halves are sealed with the master key, bound to their kid, and opened only to sign.
 */
export function createSigningKeyService(o: SigningKeyServiceOptions) {
  const { clock, box, changes } = o;
  const cache = new Map<Environment, { rows: SigningKeyRow[]; at: number }>();
  /** The last publication per environment, valid until the next status boundary of any of its keys. */
  const publications = new WeakMap<SigningKeyRow[], { from: number; until: number; keys: PublishedKey[] }>();
  const signers = new Map<string, KeyObject>();
  changes.subscribe("signing_keys", (env) => {
    if (env === "*") cache.clear();
    else cache.delete(env as Environment);
  });

  /** `em` may be lazy: a cache hit never forks it. */
  const rowsOf = async (em: Em | LazyEm, environment: Environment): Promise<SigningKeyRow[]> => {
    const hit = cache.get(environment);
    if (hit && changes.healthy && Date.now() - hit.at < CACHE_MS) return hit.rows;
    const rows = await repo.list(typeof em === "function" ? em() : em, environment);
    if (changes.healthy) cache.set(environment, { rows, at: Date.now() });
    return rows;
  };

  return {
    /**
     * Makes sure each environment has a key signing now and, from 30 days before the quarter turns, the
     * next quarter's key published as INCOMING. Idempotent and safe to run on every instance at once.
     * Returns the kids it created.
     */
    maintain: (em: Em): Promise<string[]> => maintainKeys(o, em),

    /**
     * Early rotation: a new key signs from now; the one it replaces is OUTGOING for 30 days. An INCOMING key
     * already published for the next quarter keeps its place.
     */
    rotate: (em: Em, environment: Environment): Promise<string> => rotateKey(o, em, environment),

    /**
     * The keys a verifier of `environment` may meet now, ACTIVE first. The same array is returned until a
     * key changes status or the keys change, so callers may memoise what they derive from it.
     */
    async published(em: Em | LazyEm, environment: Environment): Promise<PublishedKey[]> {
      const rows = await rowsOf(em, environment);
      const now = clock.now();
      const t = now.getTime();
      const hit = publications.get(rows);
      if (hit && t >= hit.from && t < hit.until) return hit.keys;
      const boundaries = rows.flatMap((r) => [r.notBefore, r.retiresAt, r.notAfter].map((d) => d.getTime()));
      const until = Math.min(Number.POSITIVE_INFINITY, ...boundaries.filter((b) => b > t));
      const from = Math.max(Number.NEGATIVE_INFINITY, ...boundaries.filter((b) => b <= t));
      const keys = publicationOf(rows, now);
      publications.set(rows, { from, until, keys });
      return keys;
    },

    /** The key that signs now in `environment`, with its private half opened (and kept) in memory. */
    async signer(em: Em, environment: Environment): Promise<Signer> {
      const now = clock.now();
      const row = (await rowsOf(em, environment)).find((r) => keyStatus(r, now) === "ACTIVE");
      if (!row)
        throw new ApiError("unavailable", "No signing key is active; the key schedule has not run yet.");
      let key = signers.get(row.kid);
      if (!key) {
        key = privateKeyFromPkcs8(box.open(row.privateKeyEnc, signingKeyAad(row.kid)));
        signers.set(row.kid, key);
      }
      return { kid: row.kid, environment, key };
    },
  };
}
