import { constantTimeEqualStrings } from "../platform/crypto/tokens.ts";
import type { Orm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { rateClassOf } from "../platform/http/rules.ts";
import { kUnit } from "../platform/rpc/context.ts";
import { bearer, type Edge, type RequestValidator } from "../platform/rpc/pipeline.ts";

/** The internal listener's edge: the service token, compared in constant time; one EntityManager per call. */
export function createInternalEdge(token: string, orm: Orm, validate: RequestValidator): Edge {
  return {
    async admit(call) {
      const presented = bearer(call.requestHeader);
      if (!presented)
        throw new ApiError("unauthenticated", "Send the service token as `Authorization: Bearer …`.");
      if (!constantTimeEqualStrings(presented, token)) {
        throw new ApiError("unauthenticated", "The service token is not valid.");
      }
      const em = orm.em.fork();
      call.values.set(kUnit, { kind: rateClassOf(call.method), em: () => em });
    },
    async invoke(call, request, handler) {
      validate(call.method.input, request);
      return handler();
    },
  };
}
