/**
 * The protovalidate rules of a field as JSON Schema keywords, for protoc-gen-openapi: the same rules the server
 * enforces at the edge (src/platform/rpc/validation.ts), so the document's ranges, lengths, patterns, formats,
 * enums and `required` lists are the server's, not a description's.
 */
import {
  create,
  type DescField,
  type DescMessage,
  getOption,
  hasOption,
  type Message,
  ScalarType,
} from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { createValidator } from "@bufbuild/protovalidate";
import {
  type FieldRules,
  FieldRulesSchema,
  field as fieldRules,
  Ignore,
} from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";

type Schema = Record<string, unknown>;

/** The rule messages' fields that map one to one onto a JSON Schema keyword. */
const keywords: Record<string, string> = {
  gte: "minimum",
  gt: "exclusiveMinimum",
  lte: "maximum",
  lt: "exclusiveMaximum",
  min_len: "minLength",
  max_len: "maxLength",
  pattern: "pattern",
  min_items: "minItems",
  max_items: "maxItems",
  unique: "uniqueItems",
};

/** String rules that name a JSON Schema `format`. */
const formats: Record<string, string> = {
  email: "email",
  hostname: "hostname",
  ip: "ip",
  ipv4: "ipv4",
  ipv6: "ipv6",
  uri: "uri",
  uri_ref: "uri-reference",
  uuid: "uuid",
};

/** The set fields of a rules message (`Int32Rules`, `StringRules`, …) as name → value. */
function setRules(rules: Message & { $typeName: string }, schema: DescMessage): Map<string, unknown> {
  const r = reflect(schema, rules);
  const out = new Map<string, unknown>();
  for (const f of r.fields) {
    if (!r.isSet(f)) continue;
    out.set(f.name, f.fieldKind === "list" ? [...(r.get(f) as Iterable<unknown>)] : r.get(f));
  }
  return out;
}

/** JSON numbers for the values of rules (a 64-bit rule's value is a bigint). */
const jsonNumber = (v: unknown) => (typeof v === "bigint" ? Number(v) : v);

/** The rules messages of the 64-bit integers, and each type's range. */
const RANGES_64: Record<string, [bigint, bigint]> = {
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

/**
 * The integers a 64-bit field (or each item of a list of them) takes, as the inclusive range of its type narrowed
 * by its `gte`, `gt`, `lte` and `lt` rules; undefined for other fields. Their JSON is a string, which JSON Schema's
 * `minimum` and `maximum` say nothing about: protoc-gen-openapi writes this range as a `pattern`.
 */
export function int64Bounds(field: DescField): [bigint, bigint] | undefined {
  const scalar = field.fieldKind === "scalar" || field.fieldKind === "list" ? field.scalar : undefined;
  const name = scalar === undefined ? undefined : ScalarType[scalar].toLowerCase();
  const range = name === undefined ? undefined : RANGES_64[name];
  if (!range) return undefined;
  let [min, max] = range;
  const rules = rulesOf(field);
  const type = rules?.type.case === "repeated" ? rules.type.value.items?.type : rules?.type;
  if (type?.case && type.case in RANGES_64) {
    for (const [rule, value] of setRules(type.value as never, descOf(type.value))) {
      const n = value as bigint;
      if (rule === "gte" && n > min) min = n;
      else if (rule === "gt" && n + 1n > min) min = n + 1n;
      else if (rule === "lte" && n < max) max = n;
      else if (rule === "lt" && n - 1n < max) max = n - 1n;
      else if (!["gte", "gt", "lte", "lt"].includes(rule))
        throw new Error(`${field.parent.typeName}.${field.name}: no schema for the 64-bit rule ${rule}`);
    }
  }
  return [min, max];
}

/**
 * Fields that hold a calendar day, `YYYY-MM-DD`. Their rule is a pattern (the shape, and the range where there
 * is one); the services refuse a day that is not on the calendar (`2026-02-30`: 422 naming the field), which a
 * pattern cannot say readably, so the document adds `format: date` (RFC 3339 full-date), which does.
 */
const calendarDays = new Set([
  "partner.v1.Installment.due_date",
  "partner.v1.GetBooksRequest.from",
  "partner.v1.GetBooksRequest.to",
  "partner.v1.GetBooksSeriesRequest.from",
  "partner.v1.GetBooksSeriesRequest.to",
]);

/**
 * Keywords for one value under a `type` rules message (`string`, `int32`, `enum`, …); `enumNames` turns enum
 * numbers into the names the JSON carries.
 */
function typeKeywords(
  kind: string,
  rules: Map<string, unknown>,
  enumNames: (n: number) => string | undefined,
): Schema {
  const s: Schema = {};
  for (const [name, value] of rules) {
    if (name === "len") {
      s.minLength = jsonNumber(value);
      s.maxLength = jsonNumber(value);
    } else if (name === "in") {
      const values = value as unknown[];
      s.enum = kind === "enum" ? values.map((n) => enumNames(n as number)) : values.map(jsonNumber);
    } else if (name === "const") {
      s.const = kind === "enum" ? enumNames(value as number) : jsonNumber(value);
    } else if (formats[name] && value === true) {
      s.format = formats[name];
    } else if (keywords[name] && name !== "min_items" && name !== "max_items" && name !== "unique") {
      s[keywords[name]] = jsonNumber(value);
    }
  }
  return s;
}

/** The protovalidate rules of a field, or undefined. */
export function rulesOf(field: DescField): FieldRules | undefined {
  return hasOption(field, fieldRules) ? getOption(field, fieldRules) : undefined;
}

/**
 * A field's schema with its rules applied: bounds and patterns on the value (on each item for a list's item
 * rules), the list's own size rules, and an enum narrowed to the values the rule allows. A rule that skips the
 * zero value (`IGNORE_IF_ZERO_VALUE`: "0 or unset means the default") admits that value too.
 */
export function withRules(field: DescField, schema: Schema): Schema {
  const rules = rulesOf(field);
  if (!rules) return schema;
  const enumNames = (n: number) =>
    field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum")
      ? field.enum.values.find((v) => v.number === n)?.name
      : undefined;
  const apply = (target: Schema, type: FieldRules["type"]): Schema => {
    // A 64-bit integer's bounds are its pattern, written by protoc-gen-openapi (see int64Bounds).
    if (!type.case || type.case in RANGES_64) return target;
    const kind = type.case;
    const own = setRules(type.value as never, descOf(type.value));
    if (kind === "repeated") {
      const out: Schema = { ...target };
      for (const [name, value] of own) if (keywords[name]) out[keywords[name]] = jsonNumber(value);
      const items = (type.value as { items?: FieldRules }).items;
      if (items?.type.case) out.items = apply({ ...(target.items as Schema) }, items.type);
      return out;
    }
    const extra = typeKeywords(kind, own, enumNames);
    if (kind === "string" && calendarDays.has(`${field.parent.typeName}.${field.name}`))
      extra.format = "date";
    if (kind === "enum" && extra.enum) {
      // A narrowed enum is written inline: the shared enum schema still lists every value the server answers.
      const { $ref: _ref, ...rest } = target;
      return { ...rest, type: "string", ...extra };
    }
    return { ...target, ...extra };
  };
  let constrained = apply(schema, rules.type);
  // `required` on a string or a list refuses its zero value even when it is sent: "" or [].
  const text = field.fieldKind === "scalar" && [ScalarType.STRING, ScalarType.BYTES].includes(field.scalar);
  if (rules.required && text && constrained.minLength === undefined)
    constrained = { ...constrained, minLength: 1 };
  if (rules.required && field.fieldKind === "list" && constrained.minItems === undefined)
    constrained = { ...constrained, minItems: 1 };
  if (rules.ignore !== Ignore.IF_ZERO_VALUE || field.fieldKind !== "scalar") return constrained;
  // The zero value skips every rule: the schema is "the zero value, or a value within the rules".
  const { description, ...rest } = constrained;
  const zero = field.scalar === ScalarType.STRING ? "" : 0;
  // The type stays outside, and a number's format (which zero meets); a string's format (`date`) is the rules'.
  const outside = (k: string) => k === "type" || (k === "format" && typeof zero === "number");
  const base = Object.fromEntries(Object.entries(rest).filter(([k]) => outside(k)));
  const within = Object.fromEntries(Object.entries(rest).filter(([k]) => !outside(k)));
  return { ...base, anyOf: [{ const: zero }, within], ...(description ? { description } : {}) };
}

/** The generated schema of a rules message value, for reflection over its set fields. */
function descOf(value: unknown): DescMessage {
  const name = (value as { $typeName: string }).$typeName;
  const desc = ruleSchemas.get(name);
  if (!desc) throw new Error(`no descriptor for ${name}`);
  return desc;
}
// FieldRules and every rules message under its `type` oneof (Int32Rules, StringRules, RepeatedRules, …).
const ruleSchemas = new Map<string, DescMessage>(
  [FieldRulesSchema, ...FieldRulesSchema.fields.flatMap((f) => (f.message ? [f.message] : []))].map((m) => [
    m.typeName,
    m,
  ]),
);

const validator = createValidator();

/**
 * The fields of a message that a request must send: those whose zero value (what an absent field reads as)
 * the message's rules refuse. Asked of the validator itself, on an empty message, so `required`, a minimum
 * above zero, a pattern the empty string fails and a list's minimum size all count, exactly as enforced.
 */
export function requiredByRules(message: DescMessage): Set<string> {
  const result = validator.validate(message, create(message) as never);
  const names = new Set<string>();
  if (result.kind !== "invalid") return names;
  for (const v of result.violations) {
    const first = v.field[0];
    if (v.field.length === 1 && first?.kind === "field") names.add(first.name);
  }
  return names;
}
