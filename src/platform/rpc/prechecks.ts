import type { DescMethod, DescService, Message, MessageShape } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";

/**
 * Work a method must do before its unit of work holds a database connection: a network lookup (a webhook
 * URL's DNS), whose wait must never hold a pooled connection or a transaction (ARCHITECTURE.md "Past one
 * database server"). The edge runs it after authentication and validation and before the idempotency
 * record's transaction (or a portal write's audit transaction) opens; it throws to refuse the request.
 */
export type Precheck = (request: Message, values: ContextValues) => Promise<void>;

/** One service's prechecks, by the method's local name, each typed by that method's request. */
export type Prechecks<S extends DescService> = {
  [K in keyof S["method"]]?: (
    request: MessageShape<S["method"][K]["input"]>,
    values: ContextValues,
  ) => Promise<void>;
};

/** The key of a method in a precheck table: `package.Service/Method`. */
export const methodKey = (method: DescMethod): string => `${method.parent.typeName}/${method.name}`;

/** A service's prechecks as the edge looks them up, by {@link methodKey}. */
export function precheckTable<S extends DescService>(
  service: S,
  prechecks: Prechecks<S>,
): Map<string, Precheck> {
  const table = new Map<string, Precheck>();
  for (const method of service.methods) {
    const check = (prechecks as Record<string, Precheck | undefined>)[method.localName];
    if (check) table.set(methodKey(method), check);
  }
  return table;
}
