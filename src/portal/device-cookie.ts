import { randomBytes } from "node:crypto";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";

/** How long a browser is remembered after its last successful sign-in (docs/portal.md). */
export const DEVICE_COOKIE_MS = 180 * ms.day;

/** A device id: 128 random bits, base64url. */
const DEVICE_ID = /^[A-Za-z0-9_-]{22}$/;
/** Far longer than any value `issue` makes: anything longer is not opened at all. */
const MAX_VALUE = 400;

/** The associated data of an account's device cookies: a value sealed for one email opens for no other. */
const aad = (account: string) => `portal-device:${account}`;

/** A device cookie, opened: the browser's device id and the member it signed in as. */
export interface Device {
  id: string;
  memberId: string;
}

/** What {@link createDeviceCookies} returns. */
export type DeviceCookies = ReturnType<typeof createDeviceCookies>;

/**
 * Device cookies (OWASP, "Slow Down Online Guessing Attacks with Device Cookies"): a browser that has signed
 * in as a member carries a value sealed under the master key (AES-256-GCM) naming the browser (a random device
 * id), the member, and until when it counts. The account (the email's digest) is the associated data, so a
 * value opens only for the email it was issued for, and before any query; the member it names must then be the
 * one the email belongs to, so it can be neither forged nor carried to another account, nor does it outlive a
 * removal (a person invited again is a new member). The service stores nothing per browser but its bucket of
 * failed sign-ins, and a master key rotation carries the values over as it does every sealed secret.
 */
export function createDeviceCookies({ box, clock }: { box: SecretBox; clock: Clock }) {
  return {
    /**
     * A value for the browser of `memberId`, signed in as `account`, valid 180 days; it keeps the browser's
     * device id when it had one.
     */
    issue(
      account: string,
      memberId: string,
      deviceId: string = randomBytes(16).toString("base64url"),
    ): string {
      const body = { d: deviceId, m: memberId, u: clock.now().getTime() + DEVICE_COOKIE_MS };
      return box.seal(Buffer.from(JSON.stringify(body)), aad(account)).toString("base64url");
    },

    /** The device a value names, if it was issued for `account` and is not past its 180 days. */
    open(value: string | undefined, account: string): Device | undefined {
      if (!value || value.length > MAX_VALUE || !/^[A-Za-z0-9_-]+$/.test(value)) return undefined;
      let body: { d?: unknown; m?: unknown; u?: unknown };
      try {
        body = JSON.parse(box.open(Buffer.from(value, "base64url"), aad(account)).toString("utf8"));
      } catch {
        // Forged, altered, another account's, or sealed under a master key no longer accepted.
        return undefined;
      }
      if (typeof body.d !== "string" || !DEVICE_ID.test(body.d) || typeof body.m !== "string")
        return undefined;
      if (typeof body.u !== "number" || body.u <= clock.now().getTime()) return undefined;
      return { id: body.d, memberId: body.m };
    },
  };
}
