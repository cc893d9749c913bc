import { randomInt } from "node:crypto";
import type { TestApp } from "../support/app.ts";

/** A platform user fed over the internal API, with a phone number unique to the test run. */
export async function createUser(
  t: TestApp,
  options: { environment?: "sandbox" | "production"; segment?: string } = {},
): Promise<{ userId: string; phoneNumber: string }> {
  const phoneNumber = `+23480${String(randomInt(0, 100_000_000)).padStart(8, "0")}`;
  const userId = `usr_${randomInt(1, 2 ** 40).toString(36)}${Date.now().toString(36)}`;
  await t.internal.users.upsertUser({
    id: userId,
    phoneNumber,
    segment: options.segment ?? "trader",
    environment: options.environment ?? "sandbox",
  });
  return { userId, phoneNumber };
}

/** A platform user who has given the partner an ACTIVE consent (scope `standing`, a 30-day window). */
export async function createConsentedUser(
  t: TestApp,
  partnerId: string,
  options: { environment?: "sandbox" | "production"; segment?: string } = {},
): Promise<{ userId: string; phoneNumber: string }> {
  const user = await createUser(t, options);
  await t.internal.consents.grantConsent({
    userId: user.userId,
    partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  return user;
}
