/**
 * Canonical JSON as snapshots are signed: object keys sorted by UTF-16 code units at every level, no
 * whitespace, strings escaped as JSON.stringify does, integers only. For such documents this is exactly
 * RFC 8785 (JCS) output, so any JCS library reproduces it.
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value);
    case "number":
      if (!Number.isSafeInteger(value))
        throw new TypeError(`canonical JSON holds integers only, got ${value}`);
      return String(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        // Default sort compares UTF-16 code units, as RFC 8785 requires.
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
  }
}
