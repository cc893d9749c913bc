import { monotonicFactory } from "ulid";

/** The id prefixes of CONTRACT.md §1, one per resource. */
export type IdPrefix =
  | "ptn"
  | "key"
  | "usr"
  | "cns"
  | "cnl"
  | "snp"
  | "whk"
  | "evt"
  | "dlv"
  | "dsb"
  | "rpy"
  | "req";

const next = monotonicFactory();

/** A new prefixed ULID such as `req_01JD4W6Y0M4K6H2Q8V3Z5N7B9C`; ids made in one process sort by creation. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${next()}`;
}

const idShape = /^[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when `value` is a well-formed id with the given prefix. Cheap enough to run before any query. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && idShape.test(value);
}
