/**
 * Request validation at the edge (STYLE.md habit 4): the protovalidate rules written in the partner protos,
 * enforced by protovalidate's own validator before any handler runs, on every face (the REST transcoder and
 * the Connect interceptor both reach it through the edge). The rules are the contract; this file only says how
 * a broken rule is reported, so that the contract's codes and `details.fields` stay what partners know:
 * `invalid_phone_number`, `invalid_scope`, `invalid_event_type` and `invalid_ledger_window` for the fields
 * that have their own code, else `422 validation_failed` naming each field (by its JSON path) with the words
 * below. Checks no rule can express (real calendar dates, one field against another, the caller's own terms)
 * stay in the services.
 */
import { create, type DescField, type DescService, type Message } from "@bufbuild/protobuf";
import { CompilationError, createValidator, type Violation } from "@bufbuild/protovalidate";
import { scopes } from "../consent/scopes.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import type { RequestValidator } from "../platform/rpc/pipeline.ts";
import { eventTypes } from "../webhooks/event-types.ts";
import { nulFields } from "./nul-fields.ts";

/** What a broken rule on one field says in `details.fields`: one text, or one per rule id. */
type FieldText = string | Record<string, string>;

/**
 * The words of each field's rule, as the services said them before the rules moved into the protos, keyed by
 * the field's full proto name. `parent: true` reports a list's own rule (its size) on the message holding it,
 * as `repaymentSchedule` rather than `repaymentSchedule.installments`.
 */
const fieldTexts: Record<string, { text: FieldText; parent?: true }> = {
  "partner.v1.CreateConsentLinkRequest.scopes": { text: "ask for at least one scope" },
  "partner.v1.CreateConsentLinkRequest.ledger_window_days": { text: "must be 1 to 365 days" },
  "partner.v1.CreateConsentLinkRequest.max_ledger_window_days": { text: "must be 1 to 365 days" },
  "partner.v1.CreateConsentLinkRequest.expires_in_hours": { text: "must be 1 to 168" },
  "partner.v1.CreateConsentLinkRequest.redirect_url": { text: "must be at most 2048 characters" },
  "partner.v1.CreateWebhookRequest.url": {
    text: {
      required: "not an absolute URL",
      "string.uri": "not an absolute URL",
      "string.pattern": "must be an https URL with a host, no user name or password, and a port up to 65535",
      "string.max_len": "the URL is longer than 2048 characters",
    },
  },
  "partner.v1.CreateWebhookRequest.events": {
    text: {
      "repeated.min_items": "subscribe to at least one event type or filter",
      "repeated.max_items": "at most 20 filters",
    },
  },
  "partner.v1.CreateWebhookRequest.description": { text: "must be at most 500 characters" },
  "partner.v1.UpdateWebhookRequest.url": {
    text: {
      "string.uri": "not an absolute URL",
      "string.pattern": "must be an https URL with a host, no user name or password, and a port up to 65535",
      "string.max_len": "the URL is longer than 2048 characters",
    },
  },
  "partner.v1.UpdateWebhookRequest.description": { text: "must be at most 500 characters" },
  "partner.v1.ListDeliveriesRequest.limit": { text: "must be 1 to 100" },
  "partner.v1.ListDeliveriesRequest.starting_after": { text: "must be a delivery id from a previous page" },
  "partner.v1.ListDeliveriesRequest.status": {
    text: "must be PENDING, FAILED, DELIVERED, GIVEN_UP or STATUS_UNSPECIFIED (no filter), at most 4 of them",
  },
  "partner.v1.ReplayFailedDeliveriesRequest.since": { text: "is required" },
  "partner.v1.ListEventsRequest.limit": { text: "must be 1 to 100" },
  "partner.v1.ListEventsRequest.starting_after": { text: "must be an event id from a previous page" },
  "partner.v1.ListEventsRequest.user_id": { text: "must be a user id (usr_…)" },
  "partner.v1.ListEventsRequest.object_id": { text: "must be a disbursement or consent id (dsb_… or cns_…)" },
  "partner.v1.GetDeliveryRequest.id": { text: "must be a delivery id (dlv_…)" },
  "partner.v1.GetBooksRequest.from": { text: "must be a real date YYYY-MM-DD from 1970-01-01 to 9999-12-30" },
  "partner.v1.GetBooksRequest.to": { text: "must be a real date YYYY-MM-DD from 1970-01-01 to 9999-12-30" },
  "partner.v1.GetBooksRequest.limit": { text: "must be 1 to 1000" },
  "partner.v1.GetBooksSeriesRequest.from": {
    text: "must be a real date YYYY-MM-DD from 1970-01-01 to 9999-12-30",
  },
  "partner.v1.GetBooksSeriesRequest.to": {
    text: "must be a real date YYYY-MM-DD from 1970-01-01 to 9999-12-30",
  },
  "partner.v1.ListConsentsRequest.limit": { text: "must be 1 to 100" },
  "partner.v1.ListConsentsRequest.starting_after": { text: "must be a consent id from a previous page" },
  "partner.v1.ListConsentsRequest.status": { text: "must be ACTIVE, REVOKED or EXPIRED" },
  "partner.v1.ListConsentsRequest.user_id": { text: "must be a user id (usr_…)" },
  "partner.v1.ListConsentLinksRequest.limit": { text: "must be 1 to 100" },
  "partner.v1.ListConsentLinksRequest.starting_after": {
    text: "must be a consent link id from a previous page",
  },
  "partner.v1.ListConsentLinksRequest.status": {
    text: "must be PENDING, ACCEPTED, DECLINED, EXPIRED or LOCKED",
  },
  "partner.v1.ListDisbursementsRequest.limit": { text: "must be 1 to 100" },
  "partner.v1.ListDisbursementsRequest.starting_after": {
    text: "must be a disbursement id from a previous page",
  },
  "partner.v1.ListDisbursementsRequest.status": { text: "must be a disbursement status" },
  "partner.v1.ListDisbursementsRequest.user_id": { text: "must be a user id (usr_…)" },
  "partner.v1.CreateDisbursementRequest.principal_kobo": { text: "must be 1 to 1000000000000 kobo" },
  "partner.v1.CreateDisbursementRequest.destination": { text: "must be WALLET or BANK" },
  "partner.v1.CreateDisbursementRequest.reference": { text: "must be 1 to 64 visible ASCII characters" },
  "partner.v1.CreateDisbursementRequest.repayment_schedule": { text: "must have 1 to 60 installments" },
  "partner.v1.CreateDisbursementRequest.acceptance_expires_in_hours": { text: "must be 1 to 168 (hours)" },
  "partner.v1.RepaymentSchedule.installments": { text: "must have 1 to 60 installments", parent: true },
  "partner.v1.Installment.due_date": { text: "must be a real date YYYY-MM-DD" },
  "partner.v1.Installment.amount_kobo": { text: "must be positive" },
  "partner.v1.SetStandingRequest.tier": { text: "must be one of Unrated, Emerging, Established, Trusted" },
  "partner.v1.SetStandingRequest.score": { text: "must be 0 to 1000" },
  "partner.v1.CollectRepaymentRequest.outcome": { text: "must be SUCCESS or FAILURE" },
  "partner.v1.CollectRepaymentRequest.failure_code": {
    text: "must be a snake_case code of up to 64 characters",
  },
};

/** One broken rule, located. */
interface Broken {
  violation: Violation;
  /** The field the rule is on (a list's own rules and its items' rules alike). */
  field: DescField;
  /** The JSON path, `repaymentSchedule.installments[2].dueDate`. */
  key: string;
  /** The bad value, for an item of a list of strings. */
  item?: string;
  /** The bad value, for a string field of its own (not a list). */
  value?: string;
}

const quoteAll = (values: string[]) => values.map((v) => JSON.stringify(v)).join(", ");

/**
 * Fields whose broken rules have a code of their own (CONTRACT.md §3–5), in the order the contract checks
 * them: the first that applies is the answer. A list's item codes give way to a rule on the list's size
 * (too many filters is `validation_failed`, as it always was).
 */
const ownCodes: { field: string; error: (broken: Broken[]) => ApiError }[] = [
  {
    field: "partner.v1.GetSnapshotRequest.ledger_window_days",
    error: () => new ApiError("invalid_ledger_window"),
  },
  {
    field: "partner.v1.CreateConsentLinkRequest.phone_number",
    error: () => new ApiError("invalid_phone_number"),
  },
  {
    field: "partner.v1.CreateConsentLinkRequest.scopes",
    error: (broken) => {
      const invalid = broken.flatMap((b) => (b.item === undefined ? [] : [b.item]));
      return new ApiError("invalid_scope", `Unknown scope ${quoteAll(invalid)}.`, {
        details: { invalid, scopes: [...scopes] },
      });
    },
  },
  ...[
    "CreateWebhookRequest.events",
    "UpdateWebhookRequest.add_events",
    "UpdateWebhookRequest.remove_events",
  ].map((name) => ({
    field: `partner.v1.${name}`,
    error: (broken: Broken[]) => {
      const invalid = broken.flatMap((b) => (b.item === undefined ? [] : [b.item]));
      return new ApiError(
        "invalid_event_type",
        `Unknown event type or filter: ${quoteAll(invalid)}. Use one of ${eventTypes.join(", ")}, "*", or a prefix wildcard such as "consent.*".`,
        { details: { field: broken[0]?.field.jsonName, invalid, eventTypes: [...eventTypes] } },
      );
    },
  })),
  ...["SendTestEventRequest.event_type", "ListEventsRequest.type"].map((name) => ({
    field: `partner.v1.${name}`,
    error: (broken: Broken[]) =>
      new ApiError("invalid_event_type", `Unknown event type ${JSON.stringify(broken[0]?.value ?? "")}.`, {
        details: { eventTypes: [...eventTypes] },
      }),
  })),
];
const ownCodeFields = new Set(ownCodes.map((c) => c.field));

/** The fields whose broken rules this file words: each rule-bearing field of the partner protos must be here. */
export const reportedFields: ReadonlySet<string> = new Set([...Object.keys(fieldTexts), ...ownCodeFields]);

/** Locates a violation: its field, its JSON path, and the string item it concerns, if any. */
function locate(violation: Violation, request: Message): Broken | undefined {
  let field: DescField | undefined;
  let key = "";
  let value: unknown = request;
  for (const step of violation.field) {
    if (step.kind === "field") {
      field = step;
      key += `${key ? "." : ""}${step.jsonName}`;
      value = (value as Record<string, unknown> | undefined)?.[step.localName];
    } else if (step.kind === "list_sub") {
      key += `[${step.index}]`;
      value = (value as unknown[] | undefined)?.[step.index];
    } else if (step.kind === "map_sub") {
      key += `[${JSON.stringify(String(step.key))}]`;
    }
  }
  if (!field) return undefined;
  const item = field.fieldKind === "list" && typeof value === "string" ? value : undefined;
  const scalar = field.fieldKind === "scalar" && typeof value === "string" ? value : undefined;
  return { violation, field, key, item, value: scalar };
}

/** `validation_failed` with one text per field, in the words of {@link fieldTexts}. */
function fieldsError(broken: Broken[]): ApiError {
  const fields: Record<string, string> = {};
  for (const b of broken) {
    const spec = fieldTexts[`${b.field.parent.typeName}.${b.field.name}`];
    const ownRule = b.field.fieldKind === "list" && !/\[\d+\]$/.test(b.key);
    const key = spec?.parent && ownRule ? b.key.slice(0, b.key.lastIndexOf(".")) || b.key : b.key;
    const text =
      typeof spec?.text === "string" ? spec.text : (spec?.text[b.violation.ruleId] ?? b.violation.message);
    fields[key] ??= text;
  }
  return validationFailed(fields);
}

/** Maps a request's broken rules to the one error the contract answers with. */
export function violationsError(violations: Violation[], request: Message): ApiError {
  let broken = violations.flatMap((v) => locate(v, request) ?? []);
  // A list over its size limit is answered by its size alone: its items are neither checked nor listed.
  const oversized = broken.filter((b) => b.violation.ruleId === "repeated.max_items").map((b) => `${b.key}[`);
  if (oversized.length) broken = broken.filter((b) => !oversized.some((prefix) => b.key.startsWith(prefix)));
  const nameOf = (b: Broken) => `${b.field.parent.typeName}.${b.field.name}`;
  for (const own of ownCodes) {
    const mine = broken.filter((b) => nameOf(b) === own.field);
    if (mine.length === 0 || mine.some((b) => b.violation.ruleId.startsWith("repeated."))) continue;
    return own.error(mine);
  }
  return fieldsError(
    broken.filter((b) => !ownCodeFields.has(nameOf(b)) || b.violation.ruleId.startsWith("repeated.")),
  );
}

/**
 * Builds a validator: protovalidate compiles each message's rules (CEL included) on first use and keeps
 * them, so the hot path pays only for evaluating the rules of the message at hand.
 */
export function createRequestValidator(): RequestValidator {
  const validator = createValidator();
  return (schema, request) => {
    const result = validator.validate(schema, request);
    if (result.kind === "valid") {
      // Once the rules hold: PostgreSQL's text holds no NUL, and one would fail the statement that stores it (as if
      // the database were away).
      const nul = nulFields(request);
      if (nul.length)
        throw validationFailed(
          Object.fromEntries(nul.map((k) => [k, "must not contain the NUL character (U+0000)"])),
        );
      return;
    }
    // A rule the validator cannot compile is our bug, not the caller's: it surfaces as `internal`.
    if (result.kind === "error") throw result.error;
    throw violationsError(result.violations, request);
  };
}

/**
 * The process's one validator, shared by every face: the Connect interceptor (Connect, gRPC-Web, gRPC) and the
 * REST transcoder call it with the decoded request after authentication and the rate limit, before the
 * handler and before any idempotency record, so a refused request costs no database round trip and is never
 * stored as an answer to replay. Internal messages carry no rules and pass untouched.
 */
export const validateRequest: RequestValidator = createRequestValidator();

/**
 * Compiles the rules of every request these services take, before the listeners open. Compiling a message's
 * rules (CEL included) takes up to 100 ms the first time: left to the first request of each kind after a start
 * or a deploy, it was that request's latency and, at 100 creates a second, the next fifteen's queued behind it.
 * Validating an empty request compiles everything under it; a rule that cannot compile stops the start-up
 * instead of answering `internal` to every such request.
 */
export function compileRequestRules(services: readonly DescService[]): void {
  for (const service of services)
    for (const method of service.methods) {
      try {
        validateRequest(method.input, create(method.input));
      } catch (err) {
        if (err instanceof CompilationError) throw err;
      }
    }
}
