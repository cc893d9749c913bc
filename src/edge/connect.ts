import type { DescService } from "@bufbuild/protobuf";
import { ApiError } from "../platform/errors.ts";
import type { Handler } from "../platform/http/listener.ts";
import { writeRestError } from "../platform/http/rest-errors.ts";
import type { Logger } from "../platform/logger.ts";
import { type BoundService, bind } from "../platform/rpc/binding.ts";
import { requestValues } from "../platform/rpc/context.ts";
import { edgeInterceptor } from "../platform/rpc/interceptor.ts";
import { connectAdapter } from "../platform/rpc/node-adapter.ts";
import type { Edge } from "../platform/rpc/pipeline.ts";
import { createReflection, reflectionServices } from "../platform/rpc/reflection.ts";
import { requestIdOf } from "./request-id.ts";

/** The largest request body any face reads. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Connect, gRPC-Web and gRPC for a set of services, behind the edge; the services named in `publicServices`
 * (reflection) skip it.
 */
export function connectHandler(
  services: readonly BoundService[],
  edge: Edge,
  logger: Logger,
  publicServices: readonly string[] = [],
): Handler {
  const guarded = edgeInterceptor(edge, logger);
  return connectAdapter({
    routes: (router) => {
      for (const service of services) service.register(router);
    },
    interceptors: [
      (next) => (req) => (publicServices.includes(req.service.typeName) ? next(req) : guarded(next)(req)),
    ],
    contextValues: (req) => requestValues(requestIdOf(req), req),
    // A field the message does not have is refused, as the REST face refuses it: a misspelt field is a mistake to
    // report, never a default to act on.
    jsonOptions: { alwaysEmitImplicit: true, ignoreUnknownFields: false },
    readMaxBytes: MAX_BODY_BYTES,
    fallback: (req, res) => {
      writeRestError(res, new ApiError("not_found", `No route ${req.method} ${req.url}.`), requestIdOf(req));
    },
    requestIdOf,
    onError: (message, err) => logger.error(message, { err }),
  });
}

/** The services, and reflection over them under both of its names (`v1` and `v1alpha`). */
export function withReflection(list: readonly BoundService[]): BoundService[] {
  const described: DescService[] = list.map((s) => s.service);
  const [v1, v1alpha] = reflectionServices;
  const impl = createReflection(described);
  // `v1alpha` is `v1`'s protocol under another package: its generated messages differ only in their type
  // names, so the one implementation answers both (generated-code interop: the one cast the edge makes).
  return [...list, bind(v1, impl), bind(v1alpha, impl as never)];
}
