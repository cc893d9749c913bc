import { create, type DescMethod, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import type { IdempotencyService } from "../idempotency/idempotency.service.ts";
import { restBindings } from "../platform/http/rules.ts";
import { callerOf, emOf, inUnit } from "../platform/rpc/context.ts";
import type { EdgeCall } from "../platform/rpc/pipeline.ts";
import { methodKey, type Precheck } from "../platform/rpc/prechecks.ts";
import type { PortalGate } from "../portal/portal.gate.ts";

/** What the partner edge's writes run through: idempotency keys, the portal's audit log, prechecks. */
export interface Writes {
  idempotency: IdempotencyService;
  /** A portal member's writes run inside the audit log's transaction. */
  portal?: PortalGate;
  /**
   * Work that must not hold a database connection (a destination's DNS), by {@link methodKey}: run before any
   * transaction opens. An idempotent retry whose answer is stored is replayed without it.
   */
  prechecks?: ReadonlyMap<string, Precheck>;
}

const postMethods = new WeakMap<DescMethod, boolean>();
const isPost = (method: DescMethod) => {
  let post = postMethods.get(method);
  if (post === undefined) {
    post = restBindings(method)[0]?.verb === "POST";
    postMethods.set(method, post);
  }
  return post;
};

/** The idempotency key of a POST, checked for form (400 before any other work), or undefined. */
function idempotencyKeyOf(o: Writes, call: EdgeCall): string | undefined {
  const key = call.requestHeader.get("idempotency-key");
  if (key === null || !isPost(call.method)) return undefined;
  o.idempotency.validateKey(key);
  return key;
}

/**
 * A method's precheck, holding no connection (platform/network-guard.ts). A retry whose answer is stored is
 * replayed (or refused as a reuse) by {@link runWrite} whatever the network says now, so it skips the precheck.
 */
export async function precheck(o: Writes, call: EdgeCall, request: Message): Promise<void> {
  const check = o.prechecks?.get(methodKey(call.method));
  if (!check) return;
  const key = idempotencyKeyOf(o, call);
  const stored = key !== undefined && (await o.idempotency.answered(emOf(call.values), key));
  if (!stored) await check(request, call.values);
}

/**
 * The handler in its unit of work: a portal write in its audit transaction, a POST with an `Idempotency-Key`
 * in the transaction that stores its answer (a retry gets that answer back, `Idempotent-Replayed: true`,
 * without the handler running again), anything else as it is.
 */
export async function runWrite(
  o: Writes,
  call: EdgeCall,
  request: Message,
  handler: () => Promise<unknown>,
): Promise<unknown> {
  if (o.portal?.auditsOnce(call))
    return o.portal.audited(call, request, () => runWrite(o, call, request, handler));
  const key = idempotencyKeyOf(o, call);
  if (key === undefined) return handler();
  const { method } = call;
  const result = await o.idempotency.run(
    emOf(call.values),
    callerOf(call.values),
    key,
    methodKey(method),
    toBinary(method.input, request),
    (tx) =>
      inUnit(call.values, { kind: "idempotent", em: tx, key }, async () =>
        toBinary(method.output, create(method.output, (await handler()) as Message)),
      ),
  );
  if (result.replayed) call.responseHeader.set("idempotent-replayed", "true");
  return fromBinary(method.output, result.response);
}
