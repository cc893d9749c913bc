import { randomBytes } from "node:crypto";
import { ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { ConsentAdminService, UserService } from "../../gen/internal/v1/users_pb.ts";
import { internalClient } from "./app.ts";

/** An internal client factory, as the fault tests make one against a service process's internal listener. */
export type Internal = <S extends Parameters<typeof internalClient>[0]>(
  service: S,
) => ReturnType<typeof internalClient<S>>;

/**
 * A lender on a running service process, made over its internal API (at `internalUrl`, with `token`) as an
 * operator would: the partner, its live key, and an internal client factory for the rest of the set-up.
 */
export async function productionLender(
  internalUrl: string,
  token: string,
  name: string,
): Promise<{ internal: Internal; partnerId: string; key: string }> {
  const internal: Internal = (service) => internalClient(service, internalUrl, token);
  const { partner } = await internal(PartnerService).createPartner({ name, feeRateBps: 100 });
  const partnerId = partner?.id ?? "";
  const { key } = await internal(ApiKeyService).issueApiKey({ partnerId, environment: "production" });
  return { internal, partnerId, key };
}

/**
 * `count` production users who may borrow from `partnerId`, made over the internal API as the platform would: a
 * user (trader), its payment instruments (a bank recipient and a debit authorisation) and a `standing` consent.
 * Ids and phone numbers are unique to the run; `prefix` names them (`usr_<prefix><n>…`).
 */
export async function productionBorrowers(
  internal: Internal,
  partnerId: string,
  count: number,
  prefix: string,
): Promise<string[]> {
  const users: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `usr_${prefix}${i}${randomBytes(3).toString("hex")}`;
    await internal(UserService).upsertUser({
      id,
      phoneNumber: `+23481${String(10_000_000 + i * 7_919 + randomBytes(2).readUInt16BE()).slice(0, 8)}`,
      segment: "trader",
      environment: "production",
    });
    await internal(UserService).setPaymentInstruments({
      userId: id,
      bankRecipientCode: `RCP_${prefix}${i}`,
      debitAuthorizationCode: `AUTH_${prefix}${i}`,
      debitEmail: `${prefix}${i}@example.com`,
    });
    await internal(ConsentAdminService).grantConsent({
      userId: id,
      partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    users.push(id);
  }
  return users;
}
