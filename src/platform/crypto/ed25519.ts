import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";

/** A freshly generated Ed25519 key pair: the raw public key and the PKCS#8 DER private key. */
export interface Ed25519KeyPair {
  publicKey: Buffer;
  privateKeyPkcs8: Buffer;
}

/** Generates an Ed25519 key pair. */
export function generateEd25519(): Ed25519KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return {
    publicKey: rawPublicKey(publicKey),
    privateKeyPkcs8: privateKey.export({ format: "der", type: "pkcs8" }),
  };
}

/** The 32 raw bytes of an Ed25519 public key. */
export function rawPublicKey(key: KeyObject): Buffer {
  const jwk = key.export({ format: "jwk" });
  if (typeof jwk.x !== "string") throw new Error("not an Ed25519 public key");
  return Buffer.from(jwk.x, "base64url");
}

/** A signing `KeyObject` from PKCS#8 DER; create it once and reuse it (ARCHITECTURE.md "Crypto"). */
export function privateKeyFromPkcs8(der: Uint8Array): KeyObject {
  return createPrivateKey({ key: Buffer.from(der), format: "der", type: "pkcs8" });
}

/** A verifying `KeyObject` from the 32 raw public key bytes. */
export function publicKeyFromRaw(raw: Uint8Array): KeyObject {
  return createPublicKey({
    key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(raw).toString("base64url") },
    format: "jwk",
  });
}

/** Signs `message` with Ed25519 (no pre-hash). */
export function signEd25519(key: KeyObject, message: Uint8Array): Buffer {
  return sign(null, message, key);
}
