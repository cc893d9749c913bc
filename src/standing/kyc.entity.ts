import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/** What the platform has verified about a user, as it last told us. */
export const KycEntity = defineEntity({
  name: "Kyc",
  tableName: "kyc",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("kyc_user_id_fkey")
        // Without these, MikroORM would cascade a primary-key relation; the table does not.
        .deleteRule("no action")
        .updateRule("no action"),
    level: p.enum(["NONE", "BASIC", "FULL"] as const),
    bvnVerified: p.boolean(),
    ninVerified: p.boolean(),
    phoneVerified: p.boolean(),
    addressVerified: p.boolean(),
    livenessChecked: p.boolean(),
    verifiedAt: p.datetime().nullable(),
    updatedAt: p.datetime(),
  },
});

/** A KYC row. */
export type Kyc = InferEntity<typeof KycEntity>;
