import type { DescService } from "@bufbuild/protobuf";
import {
  type ConnectRouter,
  createServiceImplSpec,
  type MethodImplSpec,
  type ServiceImpl,
} from "@connectrpc/connect";
import type { ServiceBinding } from "../http/transcoder.ts";
import { kReplay } from "./context.ts";

/** A service bound to its one implementation: served by the REST transcoder and by a Connect router alike. */
export interface BoundService extends ServiceBinding {
  /** Registers the implementation on a Connect router (Connect, gRPC-Web, gRPC). */
  register(router: ConnectRouter): void;
}

/**
 * A unary method that answers a replayed idempotent request with its stored response instead of running again:
 * the Connect protocols frame a response only on the way back from the implementation, so the replay goes
 * through it (the REST face returns the stored response itself).
 */
function replaying(spec: MethodImplSpec): MethodImplSpec {
  if (spec.kind !== "unary") return spec;
  const run = spec.impl;
  return { kind: "unary", method: spec.method, impl: (req, ctx) => ctx.values.get(kReplay) ?? run(req, ctx) };
}

/**
 * Binds `impl` to `service`: the compiler checks every method against the service's descriptor here, once, so
 * nothing downstream casts.
 */
export function bind<S extends DescService>(service: S, impl: ServiceImpl<S>): BoundService {
  const spec = createServiceImplSpec(service, impl);
  return {
    service,
    impl,
    register: (router) => {
      for (const method of Object.values(spec.methods)) {
        const m = replaying(method);
        router.rpc(m.method, m.impl);
      }
    },
  };
}
