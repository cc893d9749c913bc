import {
  type DescField,
  type DescMessage,
  fromJson,
  type JsonValue,
  type Message,
  ScalarType,
} from "@bufbuild/protobuf";
import { ApiError } from "../errors.ts";
import { assign, resolvePath } from "./field-paths.ts";
import { checkIntegerJson } from "./integer-json.ts";
import { type AnyRequest, decodeContent, readBody } from "./request-body.ts";
import type { Route } from "./rest-routes.ts";

type RequestJson = Record<string, JsonValue>;

const INTEGER_TYPES = new Set([
  ScalarType.INT32,
  ScalarType.SINT32,
  ScalarType.SFIXED32,
  ScalarType.UINT32,
  ScalarType.FIXED32,
]);

/** Contract error codes for query parameters that must be integers (CONTRACT.md §3 `invalid_ledger_window`). */
const integerFieldCodes: Record<string, "invalid_ledger_window"> = {
  "partner.v1.GetSnapshotRequest.ledger_window_days": "invalid_ledger_window",
};

/** A query or path string as the JSON value the field's parser expects. */
function scalarFromString(field: DescField, raw: string): JsonValue {
  if (
    (field.fieldKind === "scalar" || field.fieldKind === "list") &&
    field.scalar !== undefined &&
    INTEGER_TYPES.has(field.scalar)
  ) {
    const n = Number(raw);
    if (!/^-?\d{1,10}$/.test(raw) || n > 2_147_483_647 || n < -2_147_483_648) {
      const code = integerFieldCodes[`${field.parent.typeName}.${field.name}`];
      throw code
        ? new ApiError(code)
        : new ApiError("invalid_argument", `"${field.name}" must be an integer.`);
    }
    return n;
  }
  if ((field.fieldKind === "scalar" || field.fieldKind === "list") && field.scalar === ScalarType.BOOL) {
    if (raw === "true" || raw === "1") return true;
    if (raw === "false" || raw === "0") return false;
    throw new ApiError("invalid_argument", `"${field.name}" must be true or false.`);
  }
  return raw;
}

/** Whether a body is an empty JSON object (`{}`, whitespace allowed): what clients send when there is nothing. */
function isEmptyObject(raw: Buffer): boolean {
  if (raw.length > 64) return false;
  try {
    const parsed: unknown = JSON.parse(raw.toString("utf8"));
    return (
      typeof parsed === "object" &&
      parsed !== null &&
      !Array.isArray(parsed) &&
      Object.keys(parsed).length === 0
    );
  } catch {
    return false;
  }
}

/**
 * The request message's JSON from the body, as the rule's `body` says: nothing (`""`), the whole message (`*`),
 * or one field of it.
 */
function bodyJson(req: AnyRequest, route: Route, raw: Buffer): RequestJson {
  const input = route.method.input;
  const { body } = route.binding;
  const json: RequestJson = {};
  if (body === "") {
    // Many HTTP clients send `{}` by default: an empty JSON object says nothing, so it is taken as no body.
    if (raw.length > 0 && !isEmptyObject(raw)) {
      throw new ApiError("invalid_request", "This endpoint takes no request body.");
    }
    return json;
  }
  if (raw.length === 0) return json;
  const type = String(req.headers["content-type"] ?? "");
  if (!/^application\/json\s*(;|$)/i.test(type)) throw new ApiError("unsupported_media_type");
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new ApiError("invalid_request", "The request body is not valid JSON.");
  }
  if (body === "*") {
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new ApiError("invalid_request", "The request body must be a JSON object.");
    }
    return parsed as RequestJson;
  }
  const target = resolvePath(input, body);
  if (!target) throw new Error(`google.api.http body "${body}" is not a field of ${input.typeName}`);
  assign(json, target.names, parsed as JsonValue, false);
  return json;
}

/** Adds the query parameters to the request JSON: each names a scalar field not already taken by the body. */
function addQuery(json: RequestJson, route: Route, query: URLSearchParams): void {
  const input = route.method.input;
  const seen = new Set<string>();
  for (const [key, value] of query) {
    const target = route.binding.body === "*" ? undefined : resolvePath(input, key);
    if (!target || target.leaf.fieldKind === "message" || target.leaf.fieldKind === "map") {
      throw new ApiError("invalid_argument", `Unknown query parameter "${key}".`);
    }
    // One value for a field that holds one: `?limit=1&limit=1000` is refused, not read as its last value.
    if (target.leaf.fieldKind !== "list") {
      if (seen.has(key))
        throw new ApiError("invalid_argument", `Query parameter "${key}" is given more than once.`);
      seen.add(key);
    }
    assign(json, target.names, scalarFromString(target.leaf, value), target.leaf.fieldKind === "list");
  }
}

/** Adds the path template's variables to the request JSON; they win over the body and the query. */
function addPathVariables(json: RequestJson, route: Route, vars: Record<string, string>): void {
  const input = route.method.input;
  for (const [path, value] of Object.entries(vars)) {
    const target = resolvePath(input, path);
    if (!target) throw new Error(`path variable "${path}" is not a field of ${input.typeName}`);
    assign(json, target.names, scalarFromString(target.leaf, value), false);
  }
}

/** Reads a REST request's body, query and path variables into the JSON of the method's request message. */
export async function requestJson(
  req: AnyRequest,
  route: Route,
  vars: Record<string, string>,
  query: URLSearchParams | undefined,
  maxBodyBytes: number,
): Promise<RequestJson> {
  const raw = await decodeContent(req, await readBody(req, maxBodyBytes), maxBodyBytes);
  const json = bodyJson(req, route, raw);
  if (query) addQuery(json, route, query);
  addPathVariables(json, route, vars);
  return json;
}

/**
 * The request message from its JSON, its integers in canonical form (integer-json.ts). The edge checks the
 * contract's rules on it next (src/edge/validation.ts), as on the Connect and gRPC faces.
 */
export function decodeRequest(input: DescMessage, json: RequestJson): Message {
  checkIntegerJson(input, json);
  try {
    return fromJson(input, json);
  } catch (err) {
    throw new ApiError("invalid_request", (err as Error).message.replace(/^cannot decode /, "Cannot read "));
  }
}
