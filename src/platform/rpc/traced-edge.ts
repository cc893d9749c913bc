import { inSpan, tracingOn } from "../telemetry.ts";
import type { Edge, EdgeCall } from "./pipeline.ts";

const attributes = (call: EdgeCall) => ({
  "rpc.service": call.method.parent.typeName,
  "rpc.method": call.method.name,
});

/**
 * The edge with a span for each of its stages (docs/operations.md "Traces"), under the request's: `edge.admit`
 * (authentication and the rate limit), `edge.confirm` (the credentials again, once a REST body has arrived),
 * `edge.invoke` (the unit of work, idempotency) and, inside it, `handler`. With tracing off, the edge itself.
 */
export function tracedEdge(edge: Edge): Edge {
  if (!tracingOn) return edge;
  const { confirm } = edge;
  return {
    admit: (call) => inSpan("edge.admit", attributes(call), () => edge.admit(call)),
    ...(confirm && {
      confirm: (call: EdgeCall) => inSpan("edge.confirm", attributes(call), () => confirm.call(edge, call)),
    }),
    invoke: (call, request, handler) =>
      inSpan("edge.invoke", attributes(call), () =>
        edge.invoke(call, request, () => inSpan("handler", attributes(call), handler)),
      ),
  };
}
