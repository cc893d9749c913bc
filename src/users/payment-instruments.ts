import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { userRepository as repo } from "./user.repository.ts";

/**
 * The platform's payment instruments for a user, as provider codes: the transfer recipient for their bank
 * account and for their wallet, and the authorisation their direct debits are charged against. They stay
 * inside the service (sealed at rest, never returned to a partner, never logged).
 */
export interface PaymentInstruments {
  bankRecipientCode?: string;
  walletRecipientCode?: string;
  debitAuthorizationCode?: string;
  /** The e-mail address the provider holds the authorisation under (it asks for it on each charge). */
  debitEmail?: string;
}

/** What is on file, without the codes. */
export interface InstrumentsOnFile {
  bank: boolean;
  wallet: boolean;
  debit: boolean;
}

const CODE = /^[\x21-\x7e]{1,128}$/;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;
/** Binds a user's sealed instruments to the user. */
export const instrumentsAad = (userId: string) => `payment-instruments:${userId}`;
const aad = instrumentsAad;

/** What {@link createPaymentInstrumentStore} returns. */
export type PaymentInstrumentStore = ReturnType<typeof createPaymentInstrumentStore>;

/** Stores and reads users' payment instruments, sealed under the master key. */
export function createPaymentInstrumentStore(o: { box: SecretBox; now: () => Date }) {
  return {
    /** Replaces the user's instruments; an empty field removes that instrument. */
    async put(em: Em, userId: string, input: PaymentInstruments): Promise<InstrumentsOnFile> {
      const clean: PaymentInstruments = {};
      const problems: Record<string, string> = {};
      for (const field of ["bankRecipientCode", "walletRecipientCode", "debitAuthorizationCode"] as const) {
        const value = input[field];
        if (!value) continue;
        if (!CODE.test(value)) problems[field] = "must be 1 to 128 visible ASCII characters";
        else clean[field] = value;
      }
      if (input.debitEmail) {
        if (!EMAIL.test(input.debitEmail)) problems.debitEmail = "must be an e-mail address";
        else clean.debitEmail = input.debitEmail;
      }
      if (clean.debitAuthorizationCode && !clean.debitEmail)
        problems.debitEmail = "is required with debitAuthorizationCode";
      if (Object.keys(problems).length) throw validationFailed(problems);
      const onFile = {
        bank: Boolean(clean.bankRecipientCode),
        wallet: Boolean(clean.walletRecipientCode),
        debit: Boolean(clean.debitAuthorizationCode),
      };
      const stored = await repo.putInstruments(
        em,
        userId,
        o.box.seal(Buffer.from(JSON.stringify(clean)), aad(userId)),
        onFile,
        o.now(),
      );
      if (!stored) throw new ApiError("not_found", `No user ${userId}.`);
      return onFile;
    },

    /** What the user has on file. */
    async onFile(em: Em, userId: string): Promise<InstrumentsOnFile> {
      const row = await repo.instruments(em, userId);
      return { bank: row?.hasBank ?? false, wallet: row?.hasWallet ?? false, debit: row?.hasDebit ?? false };
    },

    /** The user's instruments, opened. */
    async get(em: Em, userId: string): Promise<PaymentInstruments> {
      const row = await repo.instruments(em, userId);
      return row ? (JSON.parse(o.box.open(row.sealed, aad(userId)).toString()) as PaymentInstruments) : {};
    },
  };
}
