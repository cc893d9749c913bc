/**
 * Path templates of `google/api/http.proto`: literals, `*` (one segment), `**` (the rest), variables
 * `{field.path}` and `{field.path=sub/*}`, and a trailing `:verb`.
 */
export interface PathTemplate {
  /** Matches a request path (without the query string). */
  match(path: string): Record<string, string> | undefined;
  /** Variable field paths in template order. */
  readonly variables: readonly string[];
  /** Literal segments count, used to prefer the most specific template. */
  readonly specificity: number;
  readonly source: string;
}

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function segmentsRegex(segments: string[]): { re: string; literals: number } {
  let literals = 0;
  const re = segments
    .map((seg) => {
      if (seg === "*") return "[^/]+";
      if (seg === "**") return ".+";
      literals++;
      return escapeRegex(seg);
    })
    .join("/");
  return { re, literals };
}

/** Compiles a template such as `/partner/v1/users/{user_id}/snapshot`. */
export function compileTemplate(source: string): PathTemplate {
  if (!source.startsWith("/")) throw new Error(`path template must start with "/": ${source}`);
  let body = source.slice(1);
  let verb = "";
  const lastSlash = body.lastIndexOf("/");
  const colon = body.indexOf(":", lastSlash);
  if (colon >= 0 && !body.slice(colon).includes("}")) {
    verb = body.slice(colon + 1);
    body = body.slice(0, colon);
  }
  const variables: string[] = [];
  let specificity = 0;
  const parts: string[] = [];
  const tokens = body.match(/\{[^}]*\}|[^/]+/g) ?? [];
  for (const token of tokens) {
    if (token.startsWith("{")) {
      const inner = token.slice(1, -1);
      const eq = inner.indexOf("=");
      const field = eq >= 0 ? inner.slice(0, eq) : inner;
      const sub = eq >= 0 ? inner.slice(eq + 1).split("/") : ["*"];
      const { re, literals } = segmentsRegex(sub);
      specificity += literals;
      variables.push(field);
      parts.push(`(${re})`);
    } else {
      const { re, literals } = segmentsRegex([token]);
      specificity += literals;
      parts.push(re);
    }
  }
  const regex = new RegExp(`^/${parts.join("/")}${verb ? `:${escapeRegex(verb)}` : ""}/?$`);
  return {
    source,
    variables,
    specificity,
    match(path) {
      const m = regex.exec(path);
      if (!m) return undefined;
      const out: Record<string, string> = {};
      variables.forEach((field, i) => {
        const raw = m[i + 1] ?? "";
        try {
          out[field] = decodeURIComponent(raw);
        } catch {
          out[field] = raw;
        }
      });
      return out;
    },
  };
}
