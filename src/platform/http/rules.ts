import { type DescMethod, getOption, hasOption } from "@bufbuild/protobuf";
import { http } from "../../../gen/google/api/annotations_pb.ts";
import type { HttpRule } from "../../../gen/google/api/http_pb.ts";

/** A method's REST binding: verb, path template, body field and response field. */
export interface RestBinding {
  verb: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  template: string;
  body: string;
  responseBody: string;
}

function bindingOf(rule: HttpRule): RestBinding | undefined {
  const p = rule.pattern;
  const base = { body: rule.body, responseBody: rule.responseBody };
  switch (p.case) {
    case "get":
      return { verb: "GET", template: p.value, ...base };
    case "post":
      return { verb: "POST", template: p.value, ...base };
    case "put":
      return { verb: "PUT", template: p.value, ...base };
    case "patch":
      return { verb: "PATCH", template: p.value, ...base };
    case "delete":
      return { verb: "DELETE", template: p.value, ...base };
    default:
      return undefined;
  }
}

/** Every REST binding of a method: its `google.api.http` rule and the rule's `additional_bindings`. */
export function restBindings(method: DescMethod): RestBinding[] {
  if (!hasOption(method, http)) return [];
  const rule = getOption(method, http);
  return [rule, ...rule.additionalBindings].map(bindingOf).filter((b): b is RestBinding => b !== undefined);
}

const classes = new WeakMap<DescMethod, "read" | "write">();

/** Reads are methods bound to GET; everything else writes (CONTRACT.md §8 rate-limit classes). */
export function rateClassOf(method: DescMethod): "read" | "write" {
  let cls = classes.get(method);
  if (!cls) {
    const verb = restBindings(method)[0]?.verb;
    cls = verb === "GET" || method.idempotency === 1 /* NO_SIDE_EFFECTS */ ? "read" : "write";
    classes.set(method, cls);
  }
  return cls;
}
