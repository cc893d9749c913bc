import { readFileSync } from "node:fs";
import path from "node:path";

/** Where buf writes the OpenAPI document (scripts/protoc-gen-openapi.ts). */
const DOCUMENT = path.resolve(import.meta.dirname, "../../gen/openapi/partner.v1.openapi.json");

/** The paths the documentation is served on, on the partner listener, without an API key. */
export const docsPaths = { openapi: "/partner/v1/openapi.json", reference: "/partner/v1/reference" } as const;

type Schema = {
  $ref?: string;
  type?: string;
  format?: string;
  description?: string;
  enum?: string[];
  items?: Schema;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
};
type Parameter = { name: string; in: string; required?: boolean; description?: string; schema?: Schema };
type Operation = {
  operationId: string;
  tags: string[];
  summary: string;
  description: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
};
interface OpenApi {
  info: { title: string; description: string };
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

const escapeHtml = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );
/** Proto comments and the document's description as HTML: escaped, `code` and **strong** kept, paragraphs kept. */
const prose = (s: string | undefined) =>
  (s ?? "")
    .split(/\n{2,}/)
    .map(
      (p) =>
        `<p>${escapeHtml(p.replace(/\n/g, " "))
          .replace(/`([^`]+)`/g, "<code>$1</code>")
          .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")}</p>`,
    )
    .join("");
const anchor = (name: string) => `schema-${name.replace(/[^A-Za-z0-9]/g, "-")}`;

function typeHtml(s: Schema | undefined): string {
  if (!s) return "any";
  if (s.$ref) {
    const name = s.$ref.split("/").pop() ?? "";
    return `<a href="#${anchor(name)}">${escapeHtml(name.replace(/^partner\.v1\./, ""))}</a>`;
  }
  if (s.type === "array") return `array of ${typeHtml(s.items)}`;
  if (s.type === "object" && typeof s.additionalProperties === "object")
    return `map of ${typeHtml(s.additionalProperties)}`;
  if (s.enum) return `${escapeHtml(s.type ?? "")} (${s.enum.map(escapeHtml).join(" | ")})`;
  return escapeHtml([s.type, s.format].filter(Boolean).join(" · ") || "any");
}

/** Renders the OpenAPI document as one self-contained page: no script, no external resource. */
export function renderReference(doc: OpenApi): string {
  const operations = Object.entries(doc.paths).flatMap(([p, verbs]) =>
    Object.entries(verbs).map(([verb, op]) => ({ path: p, verb, op })),
  );
  const sections = doc.tags.map((tag) => {
    const ops = operations.filter((o) => o.op.tags.includes(tag.name));
    return `<section id="${escapeHtml(tag.name)}"><h2>${escapeHtml(tag.name)}</h2>${prose(tag.description)}${ops
      .map(({ path: p, verb, op }) => {
        const params = op.parameters ?? [];
        const body = op.requestBody ? Object.values(op.requestBody.content)[0]?.schema : undefined;
        const ok = Object.values(op.responses["200"]?.content ?? {})[0]?.schema;
        return `<article id="${escapeHtml(op.operationId)}"><h3><span class="verb">${verb.toUpperCase()}</span> <code>${escapeHtml(p)}</code></h3>
${prose(op.description)}
${
  params.length
    ? `<table><caption>Parameters</caption><thead><tr><th scope="col">name</th><th scope="col">in</th><th scope="col">type</th><th scope="col">about</th></tr></thead><tbody>${params
        .map(
          (x) =>
            `<tr><td><code>${escapeHtml(x.name)}</code>${x.required ? " (required)" : ""}</td><td>${escapeHtml(x.in)}</td><td>${typeHtml(x.schema)}</td><td>${prose(x.description)}</td></tr>`,
        )
        .join("")}</tbody></table>`
    : ""
}
${body ? `<p>Request body: ${typeHtml(body)}</p>` : ""}
<p>Response: ${ok ? typeHtml(ok) : "empty"}; errors: <a href="#${anchor("partner.v1.Error")}">Error</a></p></article>`;
      })
      .join("\n")}</section>`;
  });
  const schemas = Object.entries(doc.components.schemas).map(
    ([name, s]) =>
      `<article id="${anchor(name)}"><h3>${escapeHtml(name.replace(/^partner\.v1\./, ""))}</h3>${prose(s.description)}${
        s.properties
          ? `<table><thead><tr><th scope="col">field</th><th scope="col">type</th><th scope="col">about</th></tr></thead><tbody>${Object.entries(
              s.properties,
            )
              .map(
                ([f, fs]) =>
                  `<tr><td><code>${escapeHtml(f)}</code></td><td>${typeHtml(fs)}</td><td>${prose(fs.description)}</td></tr>`,
              )
              .join("")}</tbody></table>`
          : s.enum
            ? `<p>One of ${s.enum.map((v) => `<code>${escapeHtml(v)}</code>`).join(", ")}.</p>`
            : ""
      }</article>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(doc.info.title)}: API reference</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem;color:#1a1a1a}
nav ul{columns:2}code{font-family:ui-monospace,monospace;font-size:.9em;background:#f3f3f3;padding:0 .2em}
article{border-top:1px solid #ddd;padding:.5rem 0}table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{text-align:left;vertical-align:top;border-bottom:1px solid #eee;padding:.25rem .5rem}td p{margin:0}
.verb{font-weight:700;color:#0b5394}a{color:#0b5394}
</style></head>
<body><header><h1>${escapeHtml(doc.info.title)}</h1>${prose(doc.info.description)}
<p>Machine-readable: <a href="${docsPaths.openapi}">OpenAPI 3.1 document</a>.</p></header>
<nav aria-label="Services"><ul>${doc.tags.map((t) => `<li><a href="#${escapeHtml(t.name)}">${escapeHtml(t.name)}</a></li>`).join("")}<li><a href="#schemas">Messages</a></li></ul></nav>
<main>${sections.join("\n")}<section id="schemas"><h2>Messages</h2>${schemas.join("\n")}</section></main></body></html>`;
}

/** The document and its page, read and rendered once. */
export function loadDocs(): { json: string; html: string } {
  const json = readFileSync(DOCUMENT, "utf8");
  return { json, html: renderReference(JSON.parse(json) as OpenApi) };
}
