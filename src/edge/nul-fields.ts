/**
 * The JSON paths of a message's strings (nested messages, lists and maps included) that contain U+0000; a walk
 * of the few fields a request has, allocating nothing when there is none.
 */
export function nulFields(value: unknown, path = ""): string[] {
  if (typeof value === "string") return value.includes("\0") ? [path] : [];
  if (typeof value !== "object" || value === null || value instanceof Uint8Array) return [];
  let found: string[] | undefined;
  const add = (more: string[]) => {
    if (more.length) found = [...(found ?? []), ...more];
  };
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) add(nulFields(item, `${path}[${i}]`));
    return found ?? [];
  }
  const record = value as Record<string, unknown>;
  // A oneof is `{ case, value }`: its path is the case's name.
  if (typeof record.case === "string" && "value" in record && Object.keys(record).length === 2)
    return nulFields(record.value, path ? `${path}.${record.case}` : record.case);
  for (const [k, v] of Object.entries(record)) {
    if (k.startsWith("$")) continue;
    if (typeof k === "string" && k.includes("\0")) add([path ? `${path}[key]` : "[key]"]);
    add(nulFields(v, path ? `${path}.${k}` : k));
  }
  return found ?? [];
}
