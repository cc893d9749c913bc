import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import {
  type ApiKey,
  ApiKey_StatusSchema,
  ApiKeySchema,
  type ApiKeyService,
} from "../../gen/internal/v1/api_keys_pb.ts";
import type { IngestService } from "../../gen/internal/v1/ingest_pb.ts";
import { type Partner, PartnerSchema, type PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import type { PortalAdminService } from "../../gen/internal/v1/portal_admin_pb.ts";
import { SandboxAdminService } from "../../gen/internal/v1/sandbox_admin_pb.ts";
import { SigningKeyService } from "../../gen/internal/v1/signing_keys_pb.ts";
import { type SigningKey, SigningKey_StatusSchema } from "../../gen/partner/v1/keys_pb.ts";
import { type Flags, int, need, type Output, UsageError } from "./args.ts";
import { limitCommands } from "./limits.ts";

/** Clients of the internal API's services, authenticated with the internal token. */
export interface Clients {
  partners: Client<typeof PartnerService>;
  apiKeys: Client<typeof ApiKeyService>;
  signingKeys: Client<typeof SigningKeyService>;
  sandbox: Client<typeof SandboxAdminService>;
  portal: Client<typeof PortalAdminService>;
  ingest: Client<typeof IngestService>;
}

/** One command: its flags and the clients in, what it prints out. */
export type Command = (flags: Flags, c: Clients) => Promise<Output>;

const date = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : "");
const json = <D extends DescMessage>(schema: D, m: MessageShape<D>) =>
  toJson(schema, m, { alwaysEmitImplicit: true });

function env(flags: Flags): string {
  const v = need(flags, "env");
  if (v !== "sandbox" && v !== "production") throw new UsageError("--env must be sandbox or production");
  return v;
}

const partnerLine = (p: Partner) =>
  `${p.id}  ${p.name}  fee ${p.feeRateBps} bps  created ${date(p.createdAt)}`;
const keyLine = (k: ApiKey) =>
  `${k.id}  ${k.environment}  ${k.prefix}…  ${ApiKey_StatusSchema.value[k.status]?.name}${k.expiresAt ? `  expires ${date(k.expiresAt)}` : ""}`;
const signingLine = (k: SigningKey) =>
  `${k.kid}  ${SigningKey_StatusSchema.value[k.status]?.name}  signs from ${date(k.notBefore)}  listed until ${date(k.notAfter)}`;
const keyJson = (k: ApiKey | undefined) => (k ? json(ApiKeySchema, k) : null);

/** Every command, by its two words (`partner create`). */
export const commands: Record<string, Command> = {
  ...limitCommands,
  async "partner create"(f, c) {
    const { partner } = await c.partners.createPartner({
      name: need(f, "name"),
      feeRateBps: int(f, "fee-bps", true),
    });
    if (!partner) throw new Error("no partner returned");
    return { json: json(PartnerSchema, partner), text: `created partner ${partnerLine(partner)}` };
  },
  async "partner list"(_f, c) {
    const { partners } = await c.partners.listPartners({});
    return {
      json: { partners: partners.map((p) => json(PartnerSchema, p)) },
      text: partners.length ? partners.map(partnerLine).join("\n") : "no partners yet",
    };
  },
  async "partner set-fee"(f, c) {
    const { partner } = await c.partners.setPartnerFee({
      partnerId: need(f, "partner"),
      feeRateBps: int(f, "fee-bps", true),
    });
    if (!partner) throw new Error("no partner returned");
    return { json: json(PartnerSchema, partner), text: `updated partner ${partnerLine(partner)}` };
  },
  async "partner set-terms"(f, c) {
    const { partner } = await c.partners.setPartnerTerms({
      partnerId: need(f, "partner"),
      maxCostBps: int(f, "max-cost-bps", true),
      maxTenorDays: int(f, "max-tenor-days", true),
    });
    if (!partner) throw new Error("no partner returned");
    return {
      json: json(PartnerSchema, partner),
      text: `updated partner ${partnerLine(partner)}: total repayable at most ${(10_000 + partner.maxCostBps) / 100}% of the principal, last installment within ${partner.maxTenorDays} days`,
    };
  },
  async "key issue"(f, c) {
    const res = await c.apiKeys.issueApiKey({ partnerId: need(f, "partner"), environment: env(f) });
    const k = res.apiKey;
    return {
      json: {
        id: k?.id,
        key: res.key,
        environment: k?.environment,
        partnerId: k?.partnerId,
        prefix: k?.prefix,
      },
      text: `issued ${k?.environment} key ${k?.id} for ${k?.partnerId}\n\n  ${res.key}\n\nStore it now: it is not shown again.`,
    };
  },
  async "key roll"(f, c) {
    const res = await c.apiKeys.rollApiKey({
      keyId: need(f, "key-id"),
      expiresInHours: int(f, "expires-in-hours", false),
    });
    const k = res.apiKey;
    return {
      json: { id: k?.id, key: res.key, environment: k?.environment, oldKey: keyJson(res.oldApiKey) },
      text: `rolled ${res.oldApiKey?.id}: it works until ${date(res.oldApiKey?.expiresAt)}\nnew ${k?.environment} key ${k?.id}\n\n  ${res.key}\n\nStore it now: it is not shown again.`,
    };
  },
  async "key revoke"(f, c) {
    const { apiKey } = await c.apiKeys.revokeApiKey({ keyId: need(f, "key-id") });
    return { json: keyJson(apiKey), text: `revoked ${apiKey ? keyLine(apiKey) : ""}` };
  },
  async "key list"(f, c) {
    const { apiKeys } = await c.apiKeys.listApiKeys({ partnerId: need(f, "partner") });
    return {
      json: { apiKeys: apiKeys.map(keyJson) },
      text: apiKeys.length ? apiKeys.map(keyLine).join("\n") : "no keys",
    };
  },
  async "signing-key list"(f, c) {
    const res = await c.signingKeys.listSigningKeys({ environment: env(f) });
    return {
      json: toJson(SigningKeyService.method.listSigningKeys.output, res),
      text: res.keys.map(signingLine).join("\n"),
    };
  },
  async "sandbox seed"(f, c) {
    const partner = f.partner === undefined ? "" : need(f, "partner");
    const res = await c.sandbox.seedSandbox({ partnerId: partner });
    const restored = partner
      ? `\nrestored ${partner}'s sandbox: ${res.consents} consents, ${res.consentLinks} consent links, ${res.disbursements} disbursements, ${res.standings} standings, ${res.ledgerEntries} ledger lines removed`
      : "";
    return {
      json: toJson(SandboxAdminService.method.seedSandbox.output, res, { alwaysEmitImplicit: true }),
      text: `seeded ${res.users} sandbox fixture users (${res.ledgerDays} ledger days added)${restored}`,
    };
  },
  async "ledger rebuild"(f, c) {
    const userIds = need(f, "user")
      .split(",")
      .map((u) => u.trim())
      .filter((u) => u !== "");
    const res = await c.ingest.rebuildLedgerRollups({ userIds });
    return {
      json: {
        users: userIds.length,
        entries: res.entries,
        days: res.days,
        counterparties: res.counterparties,
      },
      text: `rebuilt the roll-ups of ${userIds.length} user${userIds.length === 1 ? "" : "s"} from ${res.entries} ledger entries: ${res.days} daily rows, ${res.counterparties} counterparties`,
    };
  },
  async "portal invite"(f, c) {
    const role = need(f, "role");
    if (role !== "admin" && role !== "developer" && role !== "viewer")
      throw new UsageError("--role must be admin, developer or viewer");
    const res = await c.portal.inviteMember({ partnerId: need(f, "partner"), email: need(f, "email"), role });
    const i = res.invite;
    return {
      json: {
        id: i?.id,
        partnerId: i?.partnerId,
        email: i?.email,
        role: i?.role,
        expiresAt: date(i?.expiresAt),
        url: res.inviteUrl,
      },
      text: `invited ${i?.email} to ${i?.partnerId} as ${i?.role} (${i?.id}); the link works once, until ${date(i?.expiresAt)}:\n\n  ${res.inviteUrl}\n\nGive it to them now: it is not shown again.`,
    };
  },
  async "signing-key rotate"(f, c) {
    const res = await c.signingKeys.rotateSigningKey({ environment: env(f) });
    return {
      json: toJson(SigningKeyService.method.rotateSigningKey.output, res),
      text: `rotated: ${res.key?.kid} is ACTIVE\n${res.keys.map(signingLine).join("\n")}`,
    };
  },
};
