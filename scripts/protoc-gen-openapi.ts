/**
 * protoc-gen-openapi: a buf plugin that writes the OpenAPI 3.1 document of the partner REST API from the
 * proto files and their `google.api.http` options — the same options the server's REST transcoder is driven
 * by, so the document and the server cannot disagree. Descriptions come from the proto comments.
 *
 * Run by `buf generate` (buf.gen.yaml, `strategy: all`); writes `openapi/partner.v1.openapi.json`.
 */
import {
  create,
  createFileRegistry,
  type DescEnum,
  type DescField,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
  getOption,
  ScalarType,
} from "@bufbuild/protobuf";
import {
  CodeGeneratorResponse_Feature,
  CodeGeneratorResponseSchema,
  FileDescriptorSetSchema,
} from "@bufbuild/protobuf/wkt";
import { getComments, runNodeJs } from "@bufbuild/protoplugin";
import { type ErrorCode, errorCodes } from "../src/platform/errors.ts";
import { integerPattern } from "./integer-pattern.ts";
import { int64Bounds, requiredByRules, withRules } from "./openapi-rules.ts";

/** The runtime shape of a `google.api.HttpRule` (read from the request's own descriptors, not gen/). */
interface HttpRule {
  pattern: { case: "get" | "put" | "post" | "delete" | "patch" | "custom" | undefined; value?: unknown };
  body: string;
  responseBody: string;
}

/** The package documented. */
const PACKAGE = "partner.v1";
/** Operations that refuse to run without an Idempotency-Key (CONTRACT.md §6). */
const IDEMPOTENCY_REQUIRED = new Set(["partner.v1.DisbursementService.CreateDisbursement"]);

type Schema = Record<string, unknown>;

/** The decimal strings proto3 JSON writes for 64-bit integers: no `+`, no leading zeros, no `-0`. */
const CANONICAL_INTEGER = "^(?:0|-?[1-9][0-9]*)$";
/** The largest integer a JSON number holds exactly, in every parser that reads numbers as doubles. */
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Where a field's value comes from: a request's JSON body, a request's path or query (always a string), or
 * (undefined) an answer of the server's.
 */
type Sent = "body" | "param" | undefined;

/**
 * Fields whose rule the document narrows to production's. A webhook URL's rule admits `http://` because a
 * sandbox subscription may use one on a service run with ALLOW_LOCAL_WEBHOOKS (tests and quickstarts), which
 * production never is; everywhere else the service refuses it (422 naming `url`), so the document says https.
 */
const HTTPS_ONLY = new Set(["partner.v1.CreateWebhookRequest.url", "partner.v1.UpdateWebhookRequest.url"]);

/**
 * A 64-bit integer as a request sends it. proto3 JSON takes a decimal string or a number, and the service takes
 * exactly their canonical forms: the string's range is its pattern (the type's range narrowed by the field's
 * rules), the number's is `minimum`/`maximum`, within the integers a JSON number holds exactly (the service
 * refuses a larger one, whose digits a parser may already have changed). A path or query value is a string.
 */
function int64Schema(s: Schema, [min, max]: [bigint, bigint], sent: "body" | "param"): Schema {
  if (s.anyOf) throw new Error("a 64-bit field that skips its rules when zero has no schema yet");
  const pattern = integerPattern(min, max);
  if (sent === "param") return { ...s, pattern };
  const [lo, hi] = [min > -SAFE ? min : -SAFE, max < SAFE ? max : SAFE];
  return { ...s, type: ["string", "integer"], pattern, minimum: Number(lo), maximum: Number(hi) };
}

/**
 * A schema that also admits `null`: a `type` gains "null" (an `enum` the value null, an `anyOf` the branch
 * `{ type: "null" }`); a schema without a type (a `$ref`) sits beside `{ type: "null" }` in an `anyOf`
 * (OpenAPI 3.1).
 */
function orNull(s: Schema): Schema {
  const { description, ...rest } = s;
  if (rest.type === undefined || "const" in rest)
    return { anyOf: [rest, { type: "null" }], ...(description ? { description } : {}) };
  const types = Array.isArray(rest.type) ? rest.type : [rest.type];
  return {
    ...s,
    type: [...types, "null"],
    ...(Array.isArray(rest.enum) ? { enum: [...rest.enum, null] } : {}),
    ...(Array.isArray(rest.anyOf) ? { anyOf: [...rest.anyOf, { type: "null" }] } : {}),
  };
}

const text = (desc: Parameters<typeof getComments>[0]) =>
  (getComments(desc).leading ?? "")
    .split("\n")
    .map((l) => l.replace(/^ /, ""))
    .join("\n")
    .trim();
const firstSentence = (s: string) => (s.split(/(?<=\.)\s|\n\n/)[0] ?? "").replace(/\n/g, " ").trim();

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      // proto3 JSON: 64-bit integers are decimal strings (money in kobo among them). What a request may send
      // is int64Schema's.
      return { type: "string", pattern: CANONICAL_INTEGER, format: "int64" };
    default:
      return { type: "integer", format: "int32" };
  }
}

/**
 * The error codes an operation can answer, by what it is: every operation authenticates, is rate limited and
 * may fail; one with path parameters may not find its resource; one with a body may refuse it; a write may
 * meet a conflict or an idempotency key in use; and the codes particular to a few methods. Each status lists
 * its codes as an enum of `code`, so a generated client knows them, and the test suite checks every answer
 * against them.
 */
function errorCodesOf(
  service: DescService,
  method: DescMethod,
  shape: { pathParams: boolean; query: boolean; body: boolean; verb: string },
): ErrorCode[] {
  const codes: ErrorCode[] = [
    "invalid_request",
    // An unknown query parameter, on any operation.
    "invalid_argument",
    "unauthenticated",
    "invalid_api_key",
    "api_key_revoked",
    "api_key_expired",
    "rate_limited",
    "internal",
    "unavailable",
  ];
  if (shape.query) codes.push("invalid_argument", "validation_failed");
  // A path value holding U+0000 is refused as any field holding it is (edge/nul-fields.ts).
  if (shape.pathParams) codes.push("not_found", "validation_failed");
  if (shape.body)
    codes.push("payload_too_large", "unsupported_media_type", "invalid_argument", "validation_failed");
  if (shape.verb !== "get") codes.push("conflict");
  if (shape.verb === "post") codes.push("idempotency_key_in_use", "idempotency_key_reused");
  if (service.name === "SandboxService") codes.push("sandbox_only");
  const name = `${service.name}.${method.name}`;
  const particular: Record<string, ErrorCode[]> = {
    "SnapshotService.GetSnapshot": [
      "invalid_ledger_window",
      "consent_required",
      "consent_revoked",
      "consent_expired",
      "ledger_window_exceeds_consent",
      "too_many_concurrent_reads",
      "invalid_argument",
    ],
    "DisbursementService.CreateDisbursement": [
      "idempotency_key_required",
      "user_daily_disbursement_limit",
      "consent_required",
      "consent_revoked",
      "consent_expired",
      "permission_denied",
    ],
    "ConsentService.CreateConsentLink": ["invalid_scope", "invalid_phone_number", "invalid_ledger_window"],
    "WebhookService.CreateWebhook": ["invalid_event_type"],
    "WebhookService.UpdateWebhook": ["invalid_event_type"],
    "WebhookService.SendTestEvent": ["invalid_event_type", "webhook_sends_rate_limited"],
    "WebhookService.ReplayDelivery": ["webhook_sends_rate_limited"],
    // Its path's `id` has a pattern: a value not shaped like a `dlv_` id is refused before any lookup.
    "WebhookService.GetDelivery": ["validation_failed"],
    "WebhookService.ReplayFailedDeliveries": ["webhook_sends_rate_limited"],
    "WebhookService.ListEvents": ["invalid_event_type"],
    "SandboxService.AcceptConsentLink": ["consent_link_gone"],
    "SandboxService.DeclineConsentLink": ["consent_link_gone"],
    "SandboxService.AcceptDisbursement": ["mandate_gone"],
    "SandboxService.DeclineDisbursement": ["mandate_gone"],
    // Portal sessions only: an API key (or a viewer's write) is refused.
    "ApiKeyService.ListApiKeys": ["permission_denied"],
    "ApiKeyService.IssueApiKey": ["permission_denied", "api_key_exists"],
    "ApiKeyService.RollApiKey": ["permission_denied"],
    "ApiKeyService.RevokeApiKey": ["permission_denied"],
    "RequestLogService.ListRequests": ["permission_denied"],
    "RequestLogService.GetRequest": ["permission_denied"],
  };
  codes.push(...(particular[name] ?? []));
  return [...new Set(codes)].filter((c) => c in errorCodes);
}

/** Every message reachable from `roots` through message fields (lists and maps included), roots too. */
function reachable(roots: DescMessage[]): Set<string> {
  const seen = new Set<string>();
  const visit = (m: DescMessage) => {
    if (seen.has(m.typeName)) return;
    seen.add(m.typeName);
    for (const f of m.fields) {
      if (f.fieldKind === "message") visit(f.message);
      if (f.fieldKind === "list" && f.listKind === "message") visit(f.message);
      if (f.fieldKind === "map" && f.mapKind === "message") visit(f.message);
    }
  };
  for (const m of roots) visit(m);
  return seen;
}

function generate(files: ReturnType<typeof createFileRegistry>, toGenerate: DescFile[]) {
  const schemas: Record<string, Schema> = {};
  // Where each message is used decides what its schema promises:
  // - sent by clients (request bodies): unknown fields are refused (`additionalProperties: false`);
  // - only answered by the server, in proto3 JSON with every field emitted: each field that is not a message and
  //   not `optional` is always present (`required`);
  // - the signed snapshot document, whose JSON is the service's own: every field is present, a proto3
  //   `optional` one (and a group marked "null out of scope") as `null` when it has no value, and the scope
  //   groups (`signals`, `ledgerWindow`, `kyc`, `repaymentHistory`) absent outside their scope.
  const services0 = toGenerate.flatMap((f) => f.services);
  const inputs = reachable(services0.flatMap((s) => s.methods.map((m) => m.input)));
  const outputs = reachable(services0.flatMap((s) => s.methods.map((m) => m.output)));
  const snapshot = files.getMessage("partner.v1.Snapshot");
  const documentTypes = snapshot ? reachable([snapshot]) : new Set<string>();
  // Enums the server answers with: there an unset field reads as the zero value (`*_UNSPECIFIED`, "not set").
  const answeredEnums = new Set(
    [...outputs].flatMap((name) =>
      (files.getMessage(name)?.fields ?? []).flatMap((f) =>
        f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind === "enum") ? [f.enum.typeName] : [],
      ),
    ),
  );
  const refOf = (desc: DescMessage | DescEnum): Schema => {
    if (desc.kind === "message") addMessage(desc);
    else addEnum(desc);
    return { $ref: `#/components/schemas/${desc.typeName}` };
  };
  const typeOf = (message: DescMessage): Schema | undefined => {
    switch (message.typeName) {
      case "google.protobuf.Timestamp":
        return { type: "string", format: "date-time" };
      case "google.protobuf.Struct":
        return { type: "object", additionalProperties: true };
      case "google.protobuf.Value":
        return {};
      default:
        return undefined;
    }
  };
  const fieldSchema = (f: DescField, sent?: Sent): Schema => {
    const one = (): Schema => {
      switch (f.fieldKind) {
        case "scalar":
          return scalarSchema(f.scalar);
        case "enum":
          return refOf(f.enum);
        case "message":
          return typeOf(f.message) ?? refOf(f.message);
        case "list":
          return {
            type: "array",
            items:
              f.listKind === "scalar"
                ? scalarSchema(f.scalar)
                : f.listKind === "enum"
                  ? refOf(f.enum)
                  : (typeOf(f.message) ?? refOf(f.message)),
          };
        case "map":
          return {
            type: "object",
            additionalProperties:
              f.mapKind === "scalar"
                ? scalarSchema(f.scalar)
                : f.mapKind === "enum"
                  ? refOf(f.enum)
                  : (typeOf(f.message) ?? refOf(f.message)),
          };
      }
    };
    const s = one();
    const description = text(f);
    // The field's protovalidate rules: the bounds, patterns and enums the server enforces on requests.
    let ruled = withRules(f, description ? { ...s, description } : s);
    const bounds = int64Bounds(f);
    if (bounds && sent) {
      ruled =
        f.fieldKind === "list"
          ? { ...ruled, items: int64Schema(ruled.items as Schema, bounds, sent) }
          : int64Schema(ruled, bounds, sent);
    }
    const name = `${f.parent.typeName}.${f.name}`;
    if (HTTPS_ONLY.has(name)) {
      const pattern = String(ruled.pattern ?? "");
      if (!pattern.startsWith("^https?://")) throw new Error(`${name}: its rule no longer admits http://`);
      ruled = { ...ruled, pattern: `^https://${pattern.slice("^https?://".length)}` };
    }
    return ruled;
  };
  function addMessage(m: DescMessage, omit: string[] = [], name = m.typeName): void {
    if (schemas[name]) return;
    schemas[name] = {}; // reserve first: messages may refer to themselves
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    const inDocument = documentTypes.has(m.typeName);
    // What a request must send: the fields whose absence (their zero value) the rules refuse.
    const mustSend = inputs.has(m.typeName) ? requiredByRules(m) : new Set<string>();
    for (const f of m.fields) {
      if (omit.includes(f.name)) continue;
      let s = fieldSchema(f, inputs.has(m.typeName) ? "body" : undefined);
      if (inDocument) {
        const nullable = f.proto.proto3Optional || /\bnull out of scope\b/.test(text(f));
        if (nullable) s = orNull(s);
        // Scope groups are absent out of scope; everything else is always there.
        if (f.fieldKind !== "message" || nullable || f.message.typeName === "partner.v1.Signature")
          required.push(f.jsonName);
      } else if (outputs.has(m.typeName) && !inputs.has(m.typeName)) {
        if (f.fieldKind !== "message" && !f.proto.proto3Optional) required.push(f.jsonName);
      } else if (mustSend.has(f.name)) {
        required.push(f.jsonName);
      } else if (inputs.has(m.typeName)) {
        // proto3 JSON reads null as the field's default value: where the rules take the default, so does the
        // request. (A field that must be sent refuses null as it refuses its default.)
        s = orNull(s);
      }
      properties[f.jsonName] = s;
    }
    schemas[name] = {
      type: "object",
      description: text(m) || undefined,
      properties,
      ...(required.length ? { required } : {}),
      ...(inputs.has(m.typeName) && !outputs.has(m.typeName) ? { additionalProperties: false } : {}),
    };
  }
  function addEnum(e: DescEnum): void {
    if (schemas[e.typeName]) return;
    schemas[e.typeName] = {
      type: "string",
      description: text(e) || undefined,
      // The zero value means "not set": refused in requests, so offered only where the server answers with the
      // enum (a field not set yet, such as `revokedBy` of a consent that was never revoked).
      enum: e.values
        .filter((v) => answeredEnums.has(e.typeName) || !(v.number === 0 && v.name.endsWith("_UNSPECIFIED")))
        .map((v) => v.name),
    };
  }

  // gen/ may be cleaned while this runs, so the extension comes from the request's descriptors.
  const httpOption = files.getExtension("google.api.http");
  const ruleOf = (method: DescMethod): HttpRule | undefined =>
    httpOption ? (getOption(method as never, httpOption as never) as HttpRule) : undefined;
  const paths: Record<string, Record<string, unknown>> = {};
  const tags: { name: string; description: string }[] = [];
  const services: DescService[] = [];
  for (const file of toGenerate) services.push(...file.services);
  for (const service of services.sort((a, b) => a.typeName.localeCompare(b.typeName))) {
    tags.push({ name: service.name, description: text(service) });
    for (const method of service.methods) addOperation(service, method);
  }

  /** The error answers of an operation, a status each, its codes the enum of `code`. */
  function errorResponses(
    service: DescService,
    method: DescMethod,
    shape: Parameters<typeof errorCodesOf>[2],
  ): Record<string, Schema> {
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of errorCodesOf(service, method, shape)) {
      const status = errorCodes[code].http;
      byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    }
    return Object.fromEntries(
      [...byStatus.entries()]
        .sort(([a], [b]) => a - b)
        .map(([status, codes]) => [
          String(status),
          {
            description: `Error: ${codes.map((c) => `\`${c}\``).join(", ")}.`,
            ...(status === 429 || status === 503
              ? {
                  headers: {
                    "Retry-After": { description: "Seconds to wait.", schema: { type: "integer" } },
                  },
                }
              : {}),
            content: {
              "application/json": {
                schema: {
                  allOf: [
                    { $ref: "#/components/schemas/partner.v1.Error" },
                    {
                      type: "object",
                      required: ["code", "message", "requestId"],
                      properties: { code: { enum: codes } },
                    },
                  ],
                },
              },
            },
          },
        ]),
    );
  }

  function addOperation(service: DescService, method: DescMethod) {
    const rule = ruleOf(method);
    if (!rule || rule.pattern.case === undefined || rule.pattern.case === "custom") return;
    const verb = rule.pattern.case;
    const template = String(rule.pattern.value);
    const pathFields = [...template.matchAll(/\{([a-z0-9_.]+)(?:=[^}]*)?\}/g)].map((m) => m[1] ?? "");
    const openapiPath = template.replace(/\{([a-z0-9_.]+)(?:=[^}]*)?\}/g, "{$1}");
    const input = method.input;
    const parameters: Schema[] = pathFields.map((name) => {
      const f = input.fields.find((x) => x.name === name);
      return {
        name,
        in: "path",
        required: true,
        description: f ? text(f) : undefined,
        schema: f ? fieldSchema(f, "param") : { type: "string" },
      };
    });
    if (!rule.body) {
      const mustSend = requiredByRules(input);
      for (const f of input.fields) {
        if (pathFields.includes(f.name)) continue;
        parameters.push({
          name: f.name,
          in: "query",
          required: mustSend.has(f.name),
          description: text(f),
          schema: fieldSchema(f, "param"),
        });
      }
    }
    if (verb === "post") {
      const required = IDEMPOTENCY_REQUIRED.has(`${service.typeName}.${method.name}`);
      parameters.push({
        name: "Idempotency-Key",
        in: "header",
        required,
        description: required
          ? "Required: 1–255 characters. A retry with the same key and body returns the first response and never repeats the write."
          : "Optional: 1–255 characters. A retry with the same key and body returns the first response (`Idempotent-Replayed: true`).",
        schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,255}$" },
      });
    }
    let requestBody: Schema | undefined;
    if (rule.body === "*") {
      const bodyName = pathFields.length ? `${input.typeName}.Body` : input.typeName;
      addMessage(input, pathFields, bodyName);
      requestBody = {
        required: true,
        content: { "application/json": { schema: { $ref: `#/components/schemas/${bodyName}` } } },
      };
    } else if (rule.body) {
      const f = input.fields.find((x) => x.name === rule.body);
      if (f)
        requestBody = { required: true, content: { "application/json": { schema: fieldSchema(f, "body") } } };
    }
    let response: Schema;
    if (method.output.typeName === "google.api.HttpBody") {
      response = {
        description: "The signed document, byte for byte as signed (verify it before use).",
        content: {
          "application/json": {
            schema: files.getMessage("partner.v1.Snapshot")
              ? refOf(files.getMessage("partner.v1.Snapshot") as DescMessage)
              : { type: "object" },
          },
        },
      };
    } else {
      const f = rule.responseBody
        ? method.output.fields.find((x) => x.name === rule.responseBody)
        : undefined;
      response = {
        description: "OK",
        content: { "application/json": { schema: f ? fieldSchema(f) : refOf(method.output) } },
      };
    }
    const description = text(method);
    paths[openapiPath] ??= {};
    paths[openapiPath][verb] = {
      operationId: `${service.name}_${method.name}`,
      tags: [service.name],
      summary: firstSentence(description) || method.name,
      description,
      parameters,
      ...(requestBody ? { requestBody } : {}),
      responses: {
        "200": response,
        ...errorResponses(service, method, {
          pathParams: pathFields.length > 0,
          query: !rule.body && input.fields.length > pathFields.length,
          body: requestBody !== undefined,
          verb,
        }),
        default: { $ref: "#/components/responses/Error" },
      },
    };
  }

  // Links for stateful tools: what a create answers (its `id`) is the `{id}` of the operations on the created
  // resource (`POST /partner/v1/webhooks` → `GET`, `PATCH`, `DELETE /partner/v1/webhooks/{id}`).
  for (const [path, verbs] of Object.entries(paths)) {
    const create = verbs.post as { responses: Record<string, Schema>; operationId: string } | undefined;
    const targets = paths[`${path}/{id}`];
    if (!create || !targets) continue;
    const ok = create.responses["200"] as { content: Record<string, { schema: Schema }>; links?: Schema };
    const schema = ok.content["application/json"]?.schema;
    const target = schema?.$ref ? schemas[String(schema.$ref).split("/").pop() ?? ""] : schema;
    const props = (target?.properties ?? {}) as Record<string, Schema>;
    // The created resource's id: at the top (`{ id, … }`) or in the one message field that holds it.
    const at = props.id
      ? "/id"
      : Object.entries(props)
          .filter(
            ([, v]) => v.$ref && (schemas[String(v.$ref).split("/").pop() ?? ""]?.properties as Schema)?.id,
          )
          .map(([k]) => `/${k}/id`)[0];
    if (!at) continue;
    ok.links = Object.fromEntries(
      Object.values(targets).map((op) => {
        const id = (op as { operationId: string }).operationId;
        return [id, { operationId: id, parameters: { id: `$response.body#${at}` } }];
      }),
    );
  }

  const error = files.getMessage("partner.v1.Error");
  const errorSchema = error ? refOf(error) : { type: "object" };
  // Stable key order: the document is committed and checked for freshness.
  const sortedSchemas = Object.fromEntries(
    Object.entries(schemas)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => [k, JSON.parse(JSON.stringify(v))]),
  );
  return {
    openapi: "3.1.0",
    info: {
      title: "Partner Underwriting Data API",
      version: "v1",
      description:
        "Signed, consent-gated underwriting snapshots, consent, disbursements and signed webhooks for lending " +
        "partners. Every operation is also served over Connect, gRPC-Web and gRPC from the same proto files. " +
        'Money is integer kobo, as decimal strings in canonical form (`"5000000"`); a request may also send a JSON ' +
        "integer of at most 2^53 - 1. In a request body, `null` is a field's default value (proto3 JSON): admitted " +
        "where the default is, refused where a value must be sent. Errors share one body: " +
        "`{ code, message, requestId, details? }`. " +
        "This document is served at `/partner/v1/openapi.json`, and as a page at `/partner/v1/reference`.\n\n" +
        "**Authentication.** Send your API key on every request as `Authorization: Bearer <key>`. A key starting " +
        "`sk_sandbox_` works in the sandbox (simulated money, fixture users you can drive with the `/sandbox` " +
        "helpers); a key starting `sk_live_` works in production. Each sees only its own environment's data. Your " +
        "team issues, rolls and revokes its keys in the partner portal (`/portal`), one per environment; keep " +
        "them secret (only their SHA-256 is stored, so a lost key is rolled, never shown again). A missing key, or one not shaped " +
        "like a key (`sk_sandbox_` or `sk_live_` and 32 letters and digits: `sk_sandbox_wrong` is not), is `401 " +
        "unauthenticated`; a well-formed key that is not one of ours is `401 invalid_api_key`; a revoked one " +
        "`401 api_key_revoked`, a rolled one past its overlap `401 api_key_expired`. Rate limits are announced in the `RateLimit` " +
        "and `RateLimit-Policy` headers of every answer. POSTs take an `Idempotency-Key` header, so a retry never " +
        "acts twice.",
    },
    servers: [{ url: "/", description: "The API's own origin" }],
    security: [{ apiKey: [] }],
    tags,
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))),
    components: {
      securitySchemes: {
        apiKey: {
          type: "http",
          scheme: "bearer",
          description:
            "`Authorization: Bearer <api key>`: `sk_sandbox_…` or `sk_live_…`, one per environment.",
        },
      },
      responses: {
        Error: {
          description: "An error: the HTTP status by category, the `code` to branch on.",
          headers: {
            "Retry-After": { description: "With 429 and 503: seconds to wait.", schema: { type: "integer" } },
          },
          content: { "application/json": { schema: errorSchema } },
        },
      },
      schemas: sortedSchemas,
    },
  };
}

runNodeJs({
  name: "protoc-gen-openapi",
  version: "v1",
  run(request) {
    const files = createFileRegistry(create(FileDescriptorSetSchema, { file: request.protoFile }));
    const supportedFeatures = BigInt(CodeGeneratorResponse_Feature.PROTO3_OPTIONAL);
    // buf calls the plugin once per input; only the one holding the partner package writes the document.
    const wanted = new Set(request.fileToGenerate);
    const ours = [...files.files].filter((f) => wanted.has(f.proto.name) && f.proto.package === PACKAGE);
    if (ours.length === 0) return create(CodeGeneratorResponseSchema, { supportedFeatures });
    const doc = generate(files, ours);
    return create(CodeGeneratorResponseSchema, {
      supportedFeatures,
      file: [{ name: "openapi/partner.v1.openapi.json", content: `${JSON.stringify(doc, null, 2)}\n` }],
    });
  },
});
