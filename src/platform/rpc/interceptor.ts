import type { Message } from "@bufbuild/protobuf";
import type { Interceptor, UnaryResponse } from "@connectrpc/connect";
import type { Logger } from "../logger.ts";
import { kRequestId } from "./context.ts";
import type { Edge } from "./edge.ts";
import { toApiError, toConnectError } from "./errors.ts";
import { validateRequest } from "./validation.ts";

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
      // The contract's protovalidate rules, before the handler and before any idempotency record.
      validateRequest(req.method.input, req.message);
      let res: UnaryResponse | undefined;
      const message = (await edge.invoke(call, req.message, async () => {
        res = (await next(req)) as UnaryResponse;
        return res.message;
      })) as Message;
      const header = res?.header ?? new Headers();
      merge(header);
      return {
        stream: false,
        service: req.service,
        method: req.method,
        header,
        trailer: res?.trailer ?? new Headers(),
        message,
      } as UnaryResponse;
    } catch (err) {
      const requestId = req.contextValues.get(kRequestId);
      throw toConnectError(toApiError(err, logger.child({ requestId })), requestId, responseHeader);
    }
  };
}
