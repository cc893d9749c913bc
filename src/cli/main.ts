import { parseArgs } from "node:util";
import { ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import { ApiKeyService } from "../../gen/internal/v1/api_keys_pb.ts";
import { IngestService } from "../../gen/internal/v1/ingest_pb.ts";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { PortalAdminService } from "../../gen/internal/v1/portal_admin_pb.ts";
import { SandboxAdminService } from "../../gen/internal/v1/sandbox_admin_pb.ts";
import { SigningKeyService } from "../../gen/internal/v1/signing_keys_pb.ts";
import { UsageError } from "./args.ts";
import { type Clients, commands } from "./commands.ts";
import { discoverTarget } from "./discover.ts";
import { LIMIT_FLAG_OF, LIMIT_FLAGS } from "./limits.ts";
import { USAGE, usageOf } from "./usage.ts";

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
  user: { type: "string" },
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
    ingest: createClient(IngestService, transport),
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
