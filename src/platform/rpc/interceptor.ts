import type { Interceptor } from "@connectrpc/connect";
import type { Logger } from "../logger.ts";
import { kRequestId } from "./context.ts";
import type { Edge } from "./edge.ts";
import { toApiError, toConnectError } from "./errors.ts";

/** Runs the edge for Connect, gRPC-Web and gRPC calls, and maps every failure to the contract's error. */
export function edgeInterceptor(edge: Edge, logger: Logger): Interceptor {
  return (next) => async (req) => {
    const responseHeader = new Headers();
    const requestId = req.contextValues.get(kRequestId);
    try {
      const res = await edge(
        { method: req.method, requestHeader: req.header, values: req.contextValues, responseHeader },
        () => next(req),
      );
      responseHeader.forEach((v, k) => {
        res.header.set(k, v);
      });
      return res;
    } catch (err) {
      throw toConnectError(toApiError(err, logger.child({ requestId })), requestId, responseHeader);
    }
  };
}
