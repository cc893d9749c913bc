import { randomBytes } from "node:crypto";
import { Secret, TOTP } from "otpauth";
import QRCode from "qrcode";
import { constantTimeEqual, sha256 } from "../platform/crypto/tokens.ts";

/** RFC 6238 as every authenticator app reads it: SHA-1, 6 digits, 30-second steps. */
const PERIOD = 30;
const DIGITS = 6;
/** One step either side of now, for clocks a little off. */
const WINDOW = 1;
const ISSUER = "Partner Underwriting API";

const totpOf = (secret: string, label = "") =>
  new TOTP({
    issuer: ISSUER,
    label,
    algorithm: "SHA1",
    digits: DIGITS,
    period: PERIOD,
    secret: Secret.fromBase32(secret),
  });

/** A fresh 160-bit TOTP secret, in base32. */
export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

/** What an authenticator app enrols from: the otpauth:// URI, the secret, and the URI as an SVG QR code. */
export async function enrolment(secret: string, email: string) {
  const uri = totpOf(secret, email).toString();
  const svg = await QRCode.toString(uri, { type: "svg", errorCorrectionLevel: "M", margin: 2 });
  return { otpauthUri: uri, secret, qrSvg: svg };
}

/** The 30-second step `code` is valid for at `nowMs` (within one step either side), or undefined. */
export function totpStep(secret: string, code: string, nowMs: number): number | undefined {
  if (!/^[0-9]{6}$/.test(code)) return undefined;
  const delta = totpOf(secret).validate({ token: code, timestamp: nowMs, window: WINDOW });
  return delta === null ? undefined : Math.floor(nowMs / 1000 / PERIOD) + delta;
}

const CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const RECOVERY_CODES = 10;
const HASH_BYTES = 32;

/** A recovery code as typed: upper case, without dashes or spaces. */
const normalise = (code: string) => code.toUpperCase().replace(/[\s-]/g, "");

/**
 * Ten single-use recovery codes of 80 random bits (`XXXX-XXXX-XXXX-XXXX`), and their SHA-256 digests end to
 * end, which is all that is stored (80 bits need no slow hash).
 */
export function newRecoveryCodes(): { codes: string[]; hashes: Buffer } {
  const codes: string[] = [];
  for (let i = 0; i < RECOVERY_CODES; i++) {
    const raw = [...randomBytes(16)].map((b) => CODE_ALPHABET[b % 32]).join("");
    codes.push(raw.match(/.{4}/g)?.join("-") ?? raw);
  }
  return { codes, hashes: Buffer.concat(codes.map((c) => sha256(normalise(c)))) };
}

/** `hashes` without the digest of `code`, or undefined when `code` is not among them. */
export function useRecoveryCode(hashes: Buffer, code: string): Buffer | undefined {
  const digest = sha256(normalise(code));
  let found = -1;
  // Every digest is compared, so the position of a match does not show in the time taken.
  for (let at = 0; at + HASH_BYTES <= hashes.length; at += HASH_BYTES)
    if (constantTimeEqual(hashes.subarray(at, at + HASH_BYTES), digest) && found === -1) found = at;
  if (found === -1) return undefined;
  return Buffer.concat([hashes.subarray(0, found), hashes.subarray(found + HASH_BYTES)]);
}

/** True when `code` has the shape of a recovery code rather than a TOTP code. */
export function isRecoveryCode(code: string): boolean {
  return normalise(code).length === 16;
}
