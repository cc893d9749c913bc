import type { DescField, DescMessage, JsonValue } from "@bufbuild/protobuf";

/** Finds a field by proto name or JSON name. */
function fieldOf(message: DescMessage, name: string): DescField | undefined {
  return message.fields.find((f) => f.name === name || f.jsonName === name);
}

/** Resolves a dotted field path to the JSON names along it and the leaf field. */
export function resolvePath(
  message: DescMessage,
  path: string,
): { names: string[]; leaf: DescField } | undefined {
  const names: string[] = [];
  let current: DescMessage | undefined = message;
  let leaf: DescField | undefined;
  for (const part of path.split(".")) {
    if (!current) return undefined;
    leaf = fieldOf(current, part);
    if (!leaf) return undefined;
    names.push(leaf.jsonName);
    current = leaf.fieldKind === "message" ? leaf.message : undefined;
  }
  return leaf ? { names, leaf } : undefined;
}

/**
 * Sets the value at a path of JSON names in a message's JSON, making the objects along it; `append` adds it to
 * the list there instead (a repeated field given in the query more than once).
 */
export function assign(
  target: Record<string, JsonValue>,
  names: string[],
  value: JsonValue,
  append: boolean,
): void {
  let obj = target;
  for (const name of names.slice(0, -1)) {
    const next = obj[name];
    if (typeof next !== "object" || next === null || Array.isArray(next)) obj[name] = {};
    obj = obj[name] as Record<string, JsonValue>;
  }
  const last = names[names.length - 1] as string;
  if (append) {
    const prev = obj[last];
    obj[last] = Array.isArray(prev) ? [...prev, value] : [value];
  } else {
    obj[last] = value;
  }
}
