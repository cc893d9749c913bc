import { parseArgs } from "node:util";
import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Client, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import {
  type ApiKey,
  ApiKey_StatusSchema,
  ApiKeySchema,
  ApiKeyService,
} from "../../gen/internal/v1/api_keys_pb.ts";
import { type Partner, PartnerSchema, PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { PortalAdminService } from "../../gen/internal/v1/portal_admin_pb.ts";
import { SandboxAdminService } from "../../gen/internal/v1/sandbox_admin_pb.ts";
import { SigningKeyService } from "../../gen/internal/v1/signing_keys_pb.ts";
import { type SigningKey, SigningKey_StatusSchema } from "../../gen/partner/v1/keys_pb.ts";
import { type Flags, int, need, type Output, UsageError } from "./args.ts";
import { discoverTarget } from "./discover.ts";
import { LIMIT_FLAG_OF, LIMIT_FLAGS, LIMITS_USAGE, limitCommands } from "./limits.ts";

const USAGE = `Usage: npm run cli -- <command> [options] [--json]

  partner create --name NAME --fee-bps BPS      create a partner (fee in basis points, 0-10000)
  partner list                                   list partners
  partner set-fee --partner ID --fee-bps BPS     change a partner's fee rate
  partner set-terms --partner ID --max-cost-bps BPS --max-tenor-days DAYS
                                                 change a partner's lending caps (defaults 5000 and 365)
${LIMITS_USAGE}
  key issue --partner ID --env sandbox|production
                                                 issue a partner's API key (shown once)
  key roll --key-id ID [--expires-in-hours H]    replace a key; the old one works for H hours (default 24)
  key revoke --key-id ID                         revoke a key at once
  key list --partner ID                          list a partner's keys
  signing-key list --env sandbox|production      list published snapshot-signing keys
  signing-key rotate --env sandbox|production    rotate the signing key now
  sandbox seed [--partner ID]                    seed the sandbox fixture users now; with --partner, also
                                                 restore that partner's sandbox to its first day
  portal invite --partner ID --email EMAIL --role admin|developer|viewer
                                                 invite a person to the partner's portal: prints a single-use
                                                 URL, valid 72 hours (give it to them; it is not shown again)

The internal API is found through INTERNAL_URL and INTERNAL_TOKEN, or DATA_DIR of a service started with
\`npm start\`. With --json every command prints one JSON object (use \`npm run -s cli\` to keep npm quiet).`;

const FOOTER = USAGE.slice(USAGE.indexOf("\n\nThe internal API") + 2);

/** The usage of one command: its lines of {@link USAGE} (the command's line and those continuing it). */
function usageOf(name: string): string | undefined {
  const lines = USAGE.split("\n");
  const start = lines.findIndex((l) => l.startsWith(`  ${name} `) || l === `  ${name}`);
  if (start === -1) return undefined;
  const own = [lines[start] as string];
  for (const l of lines.slice(start + 1)) {
    if (!/^ {10,}\S/.test(l)) break;
    own.push(l);
  }
  return `Usage: npm run cli -- ${name} [options] [--json]\n\n${own.join("\n")}\n\n${FOOTER}`;
}

/** The command-line flag of an API field, for errors that name fields. */
const FLAG_OF: Record<string, string> = {
  name: "--name",
  feeRateBps: "--fee-bps",
  maxCostBps: "--max-cost-bps",
  maxTenorDays: "--max-tenor-days",
  partnerId: "--partner",
  environment: "--env",
  keyId: "--key-id",
  expiresInHours: "--expires-in-hours",
  email: "--email",
  role: "--role",
  ...LIMIT_FLAG_OF,
};

/** The fields an API error names, with what is wrong with each (from BadRequest, else ErrorInfo's details). */
function fieldsOf(err: ConnectError): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const v of err.findDetails(BadRequestSchema)[0]?.fieldViolations ?? [])
    fields[v.field] = v.description;
  if (Object.keys(fields).length > 0) return fields;
  try {
    const details = JSON.parse(err.findDetails(ErrorInfoSchema)[0]?.metadata.details ?? "{}");
    for (const [k, v] of Object.entries((details.fields ?? {}) as Record<string, unknown>))
      fields[k] = String(v);
  } catch {
    // no details
  }
  return fields;
}

interface Clients {
  partners: Client<typeof PartnerService>;
  apiKeys: Client<typeof ApiKeyService>;
  signingKeys: Client<typeof SigningKeyService>;
  sandbox: Client<typeof SandboxAdminService>;
  portal: Client<typeof PortalAdminService>;
}

type Command = (flags: Flags, c: Clients) => Promise<Output>;

const date = (t: { seconds: bigint; nanos: number } | undefined) =>
  t ? timestampDate(t as never).toISOString() : "";
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

const commands: Record<string, Command> = {
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

const flagSpec = {
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  name: { type: "string" },
  "fee-bps": { type: "string" },
  partner: { type: "string" },
  env: { type: "string" },
  "key-id": { type: "string" },
  "expires-in-hours": { type: "string" },
  email: { type: "string" },
  role: { type: "string" },
  ...LIMIT_FLAGS,
} as const;

function clients(url: string, token: string): Clients {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({ baseUrl: url, httpVersion: "1.1", interceptors: [auth] });
  return {
    partners: createClient(PartnerService, transport),
    apiKeys: createClient(ApiKeyService, transport),
    signingKeys: createClient(SigningKeyService, transport),
    sandbox: createClient(SandboxAdminService, transport),
    portal: createClient(PortalAdminService, transport),
  };
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<
    typeof parseArgs<{ options: typeof flagSpec; allowPositionals: true; args: string[] }>
  >;
  try {
    parsed = parseArgs({ args: argv, options: flagSpec, allowPositionals: true, strict: true });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const asJson = values.json === true;
  const name = positionals.slice(0, 2).join(" ");
  const command = commands[name];
  if (values.help || !command || positionals.length !== 2) {
    if (values.help) {
      // `key issue --help` is that command's usage; `--help` alone (or with an unknown command), all of them.
      process.stdout.write(`${(command && positionals.length === 2 && usageOf(name)) || USAGE}\n`);
      return 0;
    }
    const msg = positionals.length ? `unknown command "${positionals.join(" ")}"` : "no command given";
    if (asJson) process.stdout.write(`${JSON.stringify({ error: { code: "usage", message: msg } })}\n`);
    process.stderr.write(`${msg}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    const target = await discoverTarget();
    const out = await command(values, clients(target.url, target.token));
    process.stdout.write(`${asJson ? JSON.stringify(out.json) : out.text}\n`);
    return 0;
  } catch (err) {
    let code = err instanceof UsageError ? "usage" : "error";
    let message = (err as Error).message;
    let fields: Record<string, string> = {};
    if (err instanceof ConnectError) {
      code = err.findDetails(ErrorInfoSchema)[0]?.reason ?? "error";
      message = err.rawMessage;
      fields = fieldsOf(err);
    }
    const named = Object.keys(fields).length > 0;
    if (asJson)
      process.stdout.write(`${JSON.stringify({ error: { code, message, ...(named ? { fields } : {}) } })}\n`);
    process.stderr.write(`error: ${message}${code !== "error" && code !== "usage" ? ` (${code})` : ""}\n`);
    for (const [field, problem] of Object.entries(fields))
      process.stderr.write(`  ${FLAG_OF[field] ?? field}: ${problem}\n`);
    if (err instanceof UsageError) process.stderr.write(`\n${usageOf(name) ?? USAGE}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
