import { randomBytes } from "node:crypto";
import type { TestApp } from "../support/app.ts";

/** A partner with a sandbox and a live key, made through the internal API as an operator would. */
export interface PartnerFixture {
  partnerId: string;
  sandboxKey: string;
  sandboxKeyId: string;
  liveKey: string;
  liveKeyId: string;
}

/** Creates a fresh partner (a new tenant per test) with one key per environment. */
export async function createPartner(
  t: TestApp,
  name = `Lender ${randomBytes(3).toString("hex")}`,
): Promise<PartnerFixture> {
  const { partner } = await t.internal.partners.createPartner({ name, feeRateBps: 150 });
  if (!partner) throw new Error("no partner returned");
  const sandbox = await t.internal.apiKeys.issueApiKey({ partnerId: partner.id, environment: "sandbox" });
  const live = await t.internal.apiKeys.issueApiKey({ partnerId: partner.id, environment: "production" });
  return {
    partnerId: partner.id,
    sandboxKey: sandbox.key,
    sandboxKeyId: sandbox.apiKey?.id ?? "",
    liveKey: live.key,
    liveKeyId: live.apiKey?.id ?? "",
  };
}
