import type { Message } from "@bufbuild/protobuf";
import type { Interceptor, UnaryResponse } from "@connectrpc/connect";
import type { Logger } from "../logger.ts";
import { kOutcome, kReplay, kRequestId } from "./context.ts";
import { toApiError, toConnectError } from "./errors.ts";
import type { Edge } from "./pipeline.ts";

/** Runs the edge for Connect, gRPC-Web and gRPC calls, and maps every failure to the contract's error. */
export function edgeInterceptor(edge: Edge, logger: Logger): Interceptor {
  return (next) => async (req) => {
    const responseHeader = new Headers();
    const call = { method: req.method, requestHeader: req.header, values: req.contextValues, responseHeader };
    const merge = (h: Headers) =>
      responseHeader.forEach((v, k) => {
        h.set(k, v);
      });
    try {
      await edge.admit(call);
      if (req.stream) {
        const res = await next(req);
        merge(res.header);
        return res;
      }
      let res: UnaryResponse | undefined;
      const message = (await edge.invoke(call, req.message, async () => {
        res = (await next(req)) as UnaryResponse;
        return res.message;
      })) as Message;
      if (!res) {
        // Answered by the edge without the handler (a replayed idempotent request): the protocol frames a
        // response only on its way back from the implementation, which returns the stored one (binding.ts).
        req.contextValues.set(kReplay, message);
        res = (await next(req)) as UnaryResponse;
      }
      merge(res.header);
      return { ...res, message };
    } catch (err) {
      const requestId = req.contextValues.get(kRequestId);
      const error = toApiError(err, logger.child({ requestId }));
      const outcome = req.contextValues.get(kOutcome);
      if (outcome) outcome.error = error;
      const connectError = toConnectError(error, requestId, responseHeader);
      // gRPC-Web sends the error's metadata as trailers inside the body, which clients merge with the headers
      // (that carry the id already): the id would read `req_…, req_…`.
      if (req.header.get("content-type")?.startsWith("application/grpc-web"))
        connectError.metadata.delete("x-request-id");
      throw connectError;
    }
  };
}
