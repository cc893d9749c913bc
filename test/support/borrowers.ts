import { randomBytes } from "node:crypto";
import { ConsentAdminService, UserService } from "../../gen/internal/v1/users_pb.ts";
import type { internalClient } from "./app.ts";

/** An internal client factory, as the fault tests make one against a service process's internal listener. */
type Internal = <S extends Parameters<typeof internalClient>[0]>(
  service: S,
) => ReturnType<typeof internalClient<S>>;

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
