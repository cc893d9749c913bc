/**
 * The integers of a request's JSON (money in kobo among them), on REST and on the JSON of Connect and gRPC-Web,
 * held to what proto3 JSON writes and the OpenAPI document states: a decimal string in canonical form (`"0"`, `"-12"`, `"1500"`: no `+`, no leading
 * zeros, no `-0`, no white space, no `0x`/`0o`/`0b`), or a JSON number that is an integer a double holds exactly
 * (at most 2^53 − 1 either way: past that, the parser may already have changed its digits). protobuf-es reads
 * a string as JavaScript's BigInt does, so `"0x10"`, `" 5"` and `"+5"` would be 16 and 5; a request is checked
 * here before it gets there, and such a value is `400 invalid_request`, as a value of the wrong type is. The
 * range of the type (and the field's rules) is checked after, as for every request.
 */
import { type DescField, type DescMessage, type JsonValue, ScalarType } from "@bufbuild/protobuf";
import { ApiError } from "../errors.ts";

const CANONICAL = /^(?:0|-?[1-9][0-9]*)$/;

/** Every integer type: a 32-bit one sent as a string is read as JavaScript's Number reads it (`"0x1e"` is 30). */
const INTEGERS = new Set([
  ScalarType.INT64,
  ScalarType.SINT64,
  ScalarType.SFIXED64,
  ScalarType.UINT64,
  ScalarType.FIXED64,
  ScalarType.INT32,
  ScalarType.SINT32,
  ScalarType.SFIXED32,
  ScalarType.UINT32,
  ScalarType.FIXED32,
]);

/** Wrapper types whose JSON is an integer's. */
const WRAPPERS = new Set([
  "google.protobuf.Int64Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.Int32Value",
  "google.protobuf.UInt32Value",
]);

const isInteger = (f: DescField): boolean =>
  ((f.fieldKind === "scalar" || f.fieldKind === "list") && INTEGERS.has(f.scalar as ScalarType)) ||
  (f.fieldKind === "map" && f.mapKind === "scalar" && INTEGERS.has(f.scalar)) ||
  (f.fieldKind === "message" && WRAPPERS.has(f.message.typeName));

/** A message field's message, or undefined (well-known types other than the wrappers have JSON of their own). */
const nested = (f: DescField): DescMessage | undefined => {
  const m =
    f.fieldKind === "message" ||
    (f.fieldKind === "list" && f.listKind === "message") ||
    (f.fieldKind === "map" && f.mapKind === "message")
      ? f.message
      : undefined;
  return m && !m.typeName.startsWith("google.protobuf.") ? m : undefined;
};

function search(message: DescMessage, seen: Set<DescMessage>): boolean {
  if (seen.has(message)) return false;
  seen.add(message);
  return message.fields.some((f) => {
    const m = nested(f);
    return isInteger(f) || (m !== undefined && search(m, seen));
  });
}

const holds = new WeakMap<DescMessage, boolean>();

/** Whether a message has an integer anywhere under it (requests without one are not walked). */
function holdsIntegers(message: DescMessage): boolean {
  let found = holds.get(message);
  if (found === undefined) {
    found = search(message, new Set());
    holds.set(message, found);
  }
  return found;
}

function check(value: JsonValue, path: string): void {
  if (value === null) return;
  if (typeof value === "string" ? CANONICAL.test(value) : Number.isSafeInteger(value)) return;
  throw new ApiError(
    "invalid_request",
    `${path} must be an integer: a decimal string such as "1500" (no sign but "-", no leading zeros, no spaces), or a JSON number of at most 2^53 - 1.`,
  );
}

function walk(message: DescMessage, json: JsonValue, path: string): void {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return;
  for (const f of message.fields) {
    // proto3 JSON takes either name for a field.
    const key = f.jsonName in json ? f.jsonName : f.name in json ? f.name : undefined;
    if (key === undefined) continue;
    const value = json[key] as JsonValue;
    const at = path ? `${path}.${f.jsonName}` : f.jsonName;
    const m = nested(f);
    if (f.fieldKind === "list" && Array.isArray(value)) {
      value.forEach((v, i) => {
        if (isInteger(f)) check(v, `${at}[${i}]`);
        else if (m) walk(m, v, `${at}[${i}]`);
      });
    } else if (
      f.fieldKind === "map" &&
      typeof value === "object" &&
      value !== null &&
      !Array.isArray(value)
    ) {
      for (const [k, v] of Object.entries(value)) {
        if (isInteger(f)) check(v, `${at}[${JSON.stringify(k)}]`);
        else if (m) walk(m, v, `${at}[${JSON.stringify(k)}]`);
      }
    } else if (isInteger(f)) {
      check(value, at);
    } else if (m) {
      walk(m, value, at);
    }
  }
}

/**
 * Refuses a request whose integers are not in a canonical form (`400 invalid_request` naming the first
 * such field by its JSON path); anything else is left to the JSON parser and the rules.
 */
export function checkIntegerJson(message: DescMessage, json: JsonValue): void {
  if (holdsIntegers(message)) walk(message, json, "");
}
