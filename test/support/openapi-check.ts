import { readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

// Every REST answer the tests receive is checked against the published OpenAPI document, with a validator we
// did not write (ajv, JSON Schema 2020-12): a field the document does not allow, a null it does not admit, a
// missing required field or a wrong type fails the test that got it. Requests can be checked the same way
// (openApiRequestProblems), so a test can show that the document refuses what the server refuses.

const DOC_ID = "https://partner-api.invalid/openapi.json";
type Parameter = { name: string; in: "path" | "query" | "header"; required?: boolean; schema: unknown };
type Operation = {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: unknown }> }>;
};
type Doc = {
  paths: Record<string, Record<string, Operation>>;
  components: { responses: Record<string, { content?: Record<string, { schema: unknown }> }> };
};

const doc = JSON.parse(
  readFileSync(path.resolve(import.meta.dirname, "../../gen/openapi/partner.v1.openapi.json"), "utf8"),
) as Doc;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
ajv.addFormat("int32", {
  type: "number",
  validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31,
});
ajv.addFormat("int64", /^(?:0|-?[1-9][0-9]*)$/);
ajv.addSchema({ ...doc, $id: DOC_ID });
// Path and query values arrive as text: this one reads `?limit=5` as the integer the parameter's schema wants,
// and a lone `?status=FAILED` as the array a repeated parameter is.
const paramAjv = new Ajv2020({ strict: false, allErrors: true, coerceTypes: "array" });
(addFormats as unknown as (a: Ajv2020) => void)(paramAjv);
paramAjv.addFormat("int32", { type: "number", validate: (n: number) => Number.isInteger(n) });
paramAjv.addFormat("int64", /^(?:0|-?[1-9][0-9]*)$/);
paramAjv.addSchema({ ...doc, $id: DOC_ID });

const routes = Object.keys(doc.paths).map((template) => ({
  template,
  pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`),
}));
const pointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");
const validators = new Map<string, ReturnType<typeof ajv.compile>>();

/** The document's route for a path: the most literal template first, as the server routes. */
const routeOf = (pathOnly: string) =>
  routes
    .filter((r) => r.pattern.test(pathOnly))
    .sort((a, b) => b.template.split("{").length - a.template.split("{").length)
    .reverse()[0];

/** A validator for the schema at a JSON pointer into the document. */
function validatorAt(where: string, validator: Ajv2020 = ajv) {
  const key = `${validator === ajv ? "" : "param:"}${where}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = validator.compile({ $ref: `${DOC_ID}#/${where}` });
    validators.set(key, validate);
  }
  return validate;
}

const described = (
  errors: { instancePath: string; message?: string; params: unknown }[] | null | undefined,
) => (errors ?? []).map((e) => `${e.instancePath || "(value)"} ${e.message} ${JSON.stringify(e.params)}`);

/**
 * Problems with a REST request, as the document sees them: its path and query parameters (each against its
 * schema, a required one present) and its JSON body (against the request body's schema). Empty when the
 * document admits the request. Headers are not checked.
 */
export function openApiRequestProblems(method: string, url: string, body?: unknown): string[] {
  const parsed = new URL(url, "http://x");
  const route = routeOf(parsed.pathname);
  const verb = method.toLowerCase();
  const op = route && doc.paths[route.template]?.[verb];
  if (!route || !op) return [`the document has no operation ${method} ${parsed.pathname}`];
  const problems: string[] = [];
  const segments = parsed.pathname.split("/");
  const names = route.template.split("/");
  (op.parameters ?? []).forEach((param, i) => {
    if (param.in === "header") return;
    let value: unknown;
    if (param.in === "path") {
      const at = names.indexOf(`{${param.name}}`);
      value = decodeURIComponent(segments[at] ?? "");
    } else {
      const values = parsed.searchParams.getAll(param.name);
      if (values.length === 0) {
        if (param.required) problems.push(`query parameter ${param.name} is required`);
        return;
      }
      value = values.length === 1 ? values[0] : values;
    }
    const where = pointer("paths", route.template, verb, "parameters", String(i), "schema");
    const validate = validatorAt(where, paramAjv);
    if (!validate(value)) problems.push(...described(validate.errors).map((e) => `${param.name}: ${e}`));
  });
  if (body !== undefined || op.requestBody?.required) {
    if (!op.requestBody) problems.push(`${method} ${route.template} takes no body`);
    else {
      const where = pointer(
        "paths",
        route.template,
        verb,
        "requestBody",
        "content",
        "application/json",
        "schema",
      );
      const validate = validatorAt(where);
      if (!validate(body)) problems.push(...described(validate.errors).map((e) => `body: ${e}`));
    }
  }
  return problems;
}

/** Problems with a REST answer, as the document sees them; empty when it conforms (or is not the API's). */
export function openApiProblems(method: string, url: string, status: number, body: unknown): string[] {
  const pathOnly = new URL(url, "http://x").pathname;
  if (!pathOnly.startsWith("/partner/v1/") || method === "HEAD") return [];
  if (pathOnly === "/partner/v1/openapi.json" || pathOnly === "/partner/v1/reference") return [];
  const route = routeOf(pathOnly);
  const verb = method.toLowerCase();
  const op = route && doc.paths[route.template]?.[verb];
  // Not a route (404) or not this method (405): the error body is still the document's Error.
  // A listener without the partner API (the internal one) has no such route at all: the Error body applies.
  const noRoute =
    status === 404 && /^No route /.test(String((body as { message?: unknown } | undefined)?.message ?? ""));
  let where: string;
  if (!op || !route || noRoute)
    where = pointer("components", "responses", "Error", "content", "application/json", "schema");
  else {
    // Each status the operation answers is documented with its codes: `default` is for clients, not an excuse.
    const key = String(status);
    const response = op.responses[key];
    if (!response)
      return [`${method} ${route.template} answered ${status}, which the document does not list for it`];
    where = response.$ref
      ? `${response.$ref.slice(2)}/content/application~1json/schema`
      : pointer("paths", route.template, verb, "responses", key, "content", "application/json", "schema");
  }
  const validate = validatorAt(where);
  if (validate(body)) return [];
  return described(validate.errors).map((e) => e.replace(/^\(value\)/, "(body)"));
}

/** Throws when a REST answer does not conform to the document. */
export function assertConformsToOpenApi(method: string, url: string, status: number, body: unknown): void {
  const problems = openApiProblems(method, url, status, body);
  if (problems.length > 0) {
    throw new Error(
      `${method} ${url} answered ${status} with a body the OpenAPI document does not allow:\n  ${problems.join("\n  ")}\n${JSON.stringify(body).slice(0, 2000)}`,
    );
  }
}
