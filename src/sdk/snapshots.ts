import { verifyAsync } from "@noble/ed25519";
import { canonicalJson } from "./canonical-json.ts";

/**
 * Verifying snapshots before they reach a model: each is signed with Ed25519 over its canonical JSON by a
 * key of its environment, published at `GET /partner/v1/keys`. Runs in Node and in
 * browsers (`@noble/ed25519` over WebCrypto).
 *
 * ```ts
 * const verifier = createSnapshotVerifier({ baseUrl, apiKey, environment: "production" });
 * const snapshot = await verifier.verify(await res.text()); // throws SnapshotVerificationError on any doubt
 * ```
 */

/** Published keys may be cached for at most 4 hours, so a revoked key stops being trusted soon. */
export const MAX_KEY_CACHE_MS = 4 * 3_600_000;

/** Why a snapshot was rejected. */
export type SnapshotVerificationErrorCode =
  | "malformed"
  | "unsupported_algorithm"
  | "environment_mismatch"
  | "unknown_kid"
  | "bad_signature"
  | "keys_unavailable";

/** A snapshot that must not be used. */
export class SnapshotVerificationError extends Error {
  override readonly name = "SnapshotVerificationError";
  readonly code: SnapshotVerificationErrorCode;
  constructor(code: SnapshotVerificationErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** An environment a verifier is pinned to. */
export type SnapshotEnvironment = "sandbox" | "production";

/** A published signing key (GET /partner/v1/keys). */
export interface PublishedKey {
  kid: string;
  alg: string;
  environment: string;
  sandbox: boolean;
  publicKey: string;
  status: string;
  notBefore?: string;
  notAfter?: string;
}

/** Options for {@link createSnapshotVerifier}. */
export interface SnapshotVerifierOptions {
  /** The environment this verifier accepts; a snapshot signed under the other one is rejected. */
  environment: SnapshotEnvironment;
  /** Base URL of the API (keys are read from `${baseUrl}/partner/v1/keys`). */
  baseUrl?: string;
  /** The API key of the same environment. */
  apiKey?: string;
  /** Or supply the key document yourself. */
  fetchKeys?: () => Promise<{ keys: PublishedKey[] }>;
  /** How long fetched keys are trusted; capped at 4 hours. */
  cacheMs?: number;
  /** Clock in milliseconds; `Date.now` by default. */
  now?: () => number;
  fetch?: typeof fetch;
}

/** A verifier that caches keys, refetches once on an unknown kid, and pins the environment. */
export interface SnapshotVerifier {
  /** Verifies the snapshot (the raw JSON text, or the parsed object) and returns it parsed. */
  verify<T extends Record<string, unknown> = Record<string, unknown>>(
    snapshot: string | Record<string, unknown>,
  ): Promise<T>;
}

function fromBase64Url(value: string): Uint8Array {
  const b64 = value.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** The default key document source: `GET /partner/v1/keys` with the verifier's API key. */
function keysEndpoint(options: SnapshotVerifierOptions): () => Promise<{ keys: PublishedKey[] }> {
  const doFetch = options.fetch ?? globalThis.fetch;
  return async () => {
    if (!options.baseUrl || !options.apiKey)
      throw new Error("createSnapshotVerifier needs baseUrl and apiKey, or fetchKeys");
    const res = await doFetch(`${options.baseUrl.replace(/\/+$/, "")}/partner/v1/keys`, {
      headers: { authorization: `Bearer ${options.apiKey}` },
    });
    if (!res.ok) throw new Error(`GET /partner/v1/keys answered ${res.status}`);
    return (await res.json()) as { keys: PublishedKey[] };
  };
}

/** The published keys by kid, cached for at most {@link MAX_KEY_CACHE_MS}. */
function publishedKeys(options: SnapshotVerifierOptions): (kid: string) => Promise<PublishedKey> {
  const now = options.now ?? Date.now;
  const cacheMs = Math.min(options.cacheMs ?? MAX_KEY_CACHE_MS, MAX_KEY_CACHE_MS);
  const fetchKeys = options.fetchKeys ?? keysEndpoint(options);
  let cache: { at: number; keys: Map<string, PublishedKey> } | undefined;

  const load = async (): Promise<Map<string, PublishedKey>> => {
    try {
      const doc = await fetchKeys();
      cache = { at: now(), keys: new Map(doc.keys.map((k) => [k.kid, k])) };
      return cache.keys;
    } catch (err) {
      throw new SnapshotVerificationError(
        "keys_unavailable",
        `could not fetch the signing keys: ${(err as Error).message}`,
      );
    }
  };

  return async (kid) => {
    const cached = cache && now() - cache.at < cacheMs ? cache.keys : undefined;
    let key = (cached ?? (await load())).get(kid);
    // A key published after the cache was filled (a rotation): refetch once, not on every snapshot.
    if (!key && cached) key = (await load()).get(kid);
    if (!key) throw new SnapshotVerificationError("unknown_kid", `no published key ${kid}`);
    return key;
  };
}

type SignatureField = { alg: unknown; kid: string; value: string };

/** The snapshot parsed, with its Ed25519 signature, for the verifier's environment. */
function readSigned(
  snapshot: string | Record<string, unknown>,
  environment: SnapshotEnvironment,
): { doc: Record<string, unknown>; sig: SignatureField } {
  let doc: Record<string, unknown>;
  try {
    doc = typeof snapshot === "string" ? (JSON.parse(snapshot) as Record<string, unknown>) : { ...snapshot };
  } catch {
    throw new SnapshotVerificationError("malformed", "the snapshot is not JSON");
  }
  const sig = doc.signature as { alg?: unknown; kid?: unknown; value?: unknown } | undefined;
  if (!sig || typeof sig.kid !== "string" || typeof sig.value !== "string") {
    throw new SnapshotVerificationError("malformed", "the snapshot has no signature");
  }
  if (sig.alg !== "Ed25519")
    throw new SnapshotVerificationError("unsupported_algorithm", `unexpected alg ${String(sig.alg)}`);
  if (doc.environment !== environment) {
    throw new SnapshotVerificationError(
      "environment_mismatch",
      `a ${String(doc.environment)} snapshot, this verifier is for ${environment}`,
    );
  }
  return { doc, sig: sig as SignatureField };
}

/** Refuses a key of the other environment, or of another algorithm. */
function checkKey(key: PublishedKey, environment: SnapshotEnvironment): void {
  const sandboxKey = key.sandbox === true || key.environment === "sandbox";
  if ((environment === "production") === sandboxKey || key.environment !== environment) {
    throw new SnapshotVerificationError(
      "environment_mismatch",
      `key ${key.kid} belongs to ${key.environment}`,
    );
  }
  if (key.alg !== "Ed25519")
    throw new SnapshotVerificationError("unsupported_algorithm", `key ${key.kid} is ${key.alg}`);
}

/** Checks the Ed25519 signature over the canonical JSON of everything but the signature. */
async function checkSignature(doc: Record<string, unknown>, sig: SignatureField, key: PublishedKey) {
  const { signature: _omit, ...unsigned } = doc;
  let message: Uint8Array;
  let signature: Uint8Array;
  let publicKey: Uint8Array;
  try {
    message = new TextEncoder().encode(canonicalJson(unsigned));
    signature = fromBase64Url(sig.value);
    publicKey = fromBase64Url(key.publicKey);
  } catch (err) {
    throw new SnapshotVerificationError("malformed", (err as Error).message);
  }
  if (signature.length !== 64 || publicKey.length !== 32)
    throw new SnapshotVerificationError("malformed", "bad signature or key length");
  let ok = false;
  try {
    ok = await verifyAsync(signature, message, publicKey);
  } catch {
    ok = false;
  }
  if (!ok) throw new SnapshotVerificationError("bad_signature", "the signature does not match the snapshot");
}

/** Creates a snapshot verifier. */
export function createSnapshotVerifier(options: SnapshotVerifierOptions): SnapshotVerifier {
  const keyFor = publishedKeys(options);
  return {
    async verify<T extends Record<string, unknown>>(snapshot: string | Record<string, unknown>): Promise<T> {
      const { doc, sig } = readSigned(snapshot, options.environment);
      const key = await keyFor(sig.kid);
      checkKey(key, options.environment);
      await checkSignature(doc, sig, key);
      return doc as T;
    },
  };
}
