import type { Clock } from "../platform/clock.ts";
import { keyedHash } from "../platform/crypto/keys.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isE164, last4 } from "../platform/phone.ts";
import type { Environment } from "../platform/tenancy.ts";
import { userRepository as repo } from "./user.repository.ts";

/** Binds a sealed phone number to its user. */
export const phoneAad = (userId: string) => `user-phone:${userId}`;

/** The platform's user segments. */
export const segments = ["trader", "salaried", "gig", "other"] as const;
/** A user segment. */
export type Segment = (typeof segments)[number];

/** A user as the platform sends it. */
export interface UserInput {
  id: string;
  phoneNumber: string;
  segment: string;
  createdAt: Date | undefined;
  environment: Environment;
}

const USER_ID = /^usr_[0-9A-Za-z]{1,64}$/;

/** What {@link createUserService} returns. */
export type UserService = ReturnType<typeof createUserService>;

/** Users fed by the platform. Phone numbers are sealed; a keyed hash matches consent links to people. */
export function createUserService(o: { clock: Clock; box: SecretBox; phoneKey: Buffer }) {
  const phoneHash = (phone: string) => keyedHash(o.phoneKey, phone);
  return {
    phoneHash,

    /** True when the id has the form user ids take. */
    isUserId: (id: string) => USER_ID.test(id),

    async upsert(em: Em, input: UserInput): Promise<{ created: boolean }> {
      const problems: Record<string, string> = {};
      if (!USER_ID.test(input.id)) problems.id = "must be usr_ followed by up to 64 letters and digits";
      if (!isE164(input.phoneNumber)) problems.phoneNumber = "must be an E.164 number such as +2348012345678";
      if (!(segments as readonly string[]).includes(input.segment))
        problems.segment = `must be one of ${segments.join(", ")}`;
      if (Object.keys(problems).length) throw validationFailed(problems);
      const now = o.clock.now();
      try {
        const row = await repo.upsert(em, {
          id: input.id,
          environment: input.environment,
          phoneHash: phoneHash(input.phoneNumber),
          phoneEnc: o.box.seal(Buffer.from(input.phoneNumber), phoneAad(input.id)),
          phoneLast4: last4(input.phoneNumber),
          segment: input.segment as Segment,
          createdAt: input.createdAt ?? now,
          updatedAt: now,
        });
        if (!row) throw new ApiError("conflict", `User ${input.id} exists in the other environment.`);
        return { created: row.created };
      } catch (err) {
        if ((err as { code?: string }).code === "23505") {
          throw new ApiError("conflict", "Another user of this environment has this phone number.");
        }
        throw err;
      }
    },

    /** The user's environment, or undefined when there is no such user. */
    async environmentOf(em: Em, userId: string): Promise<Environment | undefined> {
      if (!USER_ID.test(userId)) return undefined;
      return repo.environmentOf(em, userId);
    },

    /** The user with this phone number in the environment. */
    byPhone(em: Em, environment: Environment, phoneHashValue: Buffer): Promise<string | undefined> {
      return repo.byPhone(em, environment, phoneHashValue);
    },

    /**
     * The number the platform holds for the user with this phone hash, and the user's id: where a one-time
     * code is sent (never a number a partner typed).
     */
    async phoneOf(
      em: Em,
      environment: Environment,
      phoneHashValue: Buffer,
    ): Promise<{ userId: string; phoneNumber: string } | undefined> {
      const user = await repo.sealedPhoneOf(em, environment, phoneHashValue);
      if (!user) return undefined;
      return { userId: user.id, phoneNumber: o.box.open(user.phoneEnc, phoneAad(user.id)).toString("utf8") };
    },

    /** The keyed hash of the user's phone number (where their one-time codes go) and its last four digits. */
    contactOf(em: Em, userId: string): Promise<{ phoneHash: Buffer; phoneLast4: string } | undefined> {
      return repo.contactOf(em, userId);
    },

    /** Those of these users that exist. */
    existing(em: Em, userIds: string[]): Promise<Set<string>> {
      return repo.existing(em, userIds);
    },

    /** Fails with `validation_failed`, naming a few, unless every one of these users exists (the platform upserts first). */
    async assertExist(em: Em, userIds: string[]): Promise<void> {
      const found = await repo.existing(em, userIds);
      const missing = [...new Set(userIds)].filter((id) => !found.has(id));
      if (missing.length > 0)
        throw validationFailed({
          userId: `unknown users: ${missing.slice(0, 5).join(", ")} (UpsertUser first)`,
        });
    },
  };
}
