import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { ApiError, validationFailed } from "../platform/errors.ts";

/**
 * OWASP's current minimum for scrypt (Password Storage Cheat Sheet): N = 2^17, r = 8, p = 1. Stored with each
 * hash, so they can be raised later without touching the hashes already made.
 */
const PARAMS = { logN: 17, r: 8, p: 1 } as const;

/**
 * The cost of new hashes: OWASP's, or a lower N the tests ask for (`TEST_PASSWORD_HASH_LOG_N`, test/README.md),
 * so the many suites that enrol and sign members in do not spend seconds of CPU per password. Read at each
 * hash, so a test of the hashing limits sets the real cost for itself; the service warns at start when it is
 * set.
 */
export function passwordHashCost(): { logN: number; r: number; p: number } {
  const asked = process.env.TEST_PASSWORD_HASH_LOG_N;
  if (!asked) return PARAMS;
  const logN = Number(asked);
  if (!Number.isInteger(logN) || logN < 10 || logN > PARAMS.logN)
    throw new Error(`TEST_PASSWORD_HASH_LOG_N must be an integer from 10 to ${PARAMS.logN}`);
  return { ...PARAMS, logN };
}
const SALT_BYTES = 16;
const KEY_BYTES = 32;
/** scrypt needs 128·N·r bytes; node's default cap (32 MiB) is below that, so it is raised with headroom. */
const maxmemFor = (logN: number, r: number) => 2 * 128 * 2 ** logN * r;
/** Hashes at once per process: each holds 128 MiB and a libuv thread, so a flood of sign-ins queues here. */
const MAX_RUNNING = 2;
/** Hashes waiting, per lane; past this the service answers 503 rather than queue without bound. */
const MAX_WAITING = 64;
/** The longest a hash waits for its turn. */
const WAIT_MS = 10_000;

/** The shortest and longest passwords accepted (docs/portal.md). */
export const PASSWORD_LENGTH = { min: 12, max: 128 } as const;

/**
 * Who a hash is for: `first`, someone the service already has reason to trust (a browser the member has signed
 * in on, the holder of an invitation), goes before `others`: strangers guessing at many accounts from many
 * addresses can fill the hashing slots and their queue, but never make a member wait behind them.
 */
export type HashLane = "first" | "others";

let running = 0;
const waiting: Record<HashLane, (() => void)[]> = { first: [], others: [] };

async function turn(lane: HashLane): Promise<void> {
  if (running < MAX_RUNNING) {
    running++;
    return;
  }
  const queue = waiting[lane];
  if (queue.length >= MAX_WAITING) throw new ApiError("unavailable", undefined, { retryAfterSeconds: 1 });
  await new Promise<void>((resolve, reject) => {
    const go = () => {
      clearTimeout(timer);
      running++;
      resolve();
    };
    const timer = setTimeout(() => {
      queue.splice(queue.indexOf(go), 1);
      reject(new ApiError("unavailable", undefined, { retryAfterSeconds: 1 }));
    }, WAIT_MS);
    queue.push(go);
  });
}

function done(): void {
  running--;
  (waiting.first.shift() ?? waiting.others.shift())?.();
}

async function derive(
  password: string,
  salt: Buffer,
  params: { logN: number; r: number; p: number },
  lane: HashLane,
): Promise<Buffer> {
  const { logN, r, p } = params;
  await turn(lane);
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      scrypt(
        password.normalize("NFC"),
        salt,
        KEY_BYTES,
        { N: 2 ** logN, r, p, maxmem: maxmemFor(logN, r) },
        (err, key) => (err ? reject(err) : resolve(key)),
      ),
    );
  } finally {
    done();
  }
}

/** Refuses a password outside 12–128 characters with `validation_failed` on `password`. */
export function checkPassword(password: string): void {
  const length = [...password].length;
  if (length < PASSWORD_LENGTH.min || length > PASSWORD_LENGTH.max)
    throw validationFailed({
      password: `must be ${PASSWORD_LENGTH.min} to ${PASSWORD_LENGTH.max} characters`,
    });
}

/** `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>`, base64url, with a fresh salt. */
export async function hashPassword(password: string, lane: HashLane = "others"): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const cost = passwordHashCost();
  const key = await derive(password, salt, cost, lane);
  return ["scrypt", cost.logN, cost.r, cost.p, salt.toString("base64url"), key.toString("base64url")].join(
    "$",
  );
}

/** True when `password` matches `encoded` (compared in constant time, with the parameters stored in it). */
export async function verifyPassword(
  password: string,
  encoded: string,
  lane: HashLane = "others",
): Promise<boolean> {
  const [scheme, logN, r, p, salt, hash] = encoded.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const params = { logN: Number(logN), r: Number(r), p: Number(p) };
  const key = await derive(password, Buffer.from(salt, "base64url"), params, lane);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** One dummy hash per cost, made at first use. */
const dummies = new Map<number, Promise<string>>();

/**
 * Spends the time of a real verification for an email nobody has, so an answer's timing does not tell
 * whether an account exists.
 */
export async function verifyDummy(password: string): Promise<false> {
  const { logN } = passwordHashCost();
  let dummy = dummies.get(logN);
  if (!dummy) {
    dummy = hashPassword(randomBytes(16).toString("hex"));
    dummies.set(logN, dummy);
  }
  await verifyPassword(password, await dummy);
  return false;
}
