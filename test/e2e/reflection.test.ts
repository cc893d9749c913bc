import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { create, createFileRegistry, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ServerReflectionRequest,
  ServerReflectionRequestSchema,
  type ServerReflectionResponse,
  ServerReflectionResponseSchema,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.ts";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { grpcUnary } from "../support/clients.ts";

// Tools that know nothing of our protos learn them from the server: `buf curl` (a client we did not write)
// lists the services over either reflection protocol, and a v1alpha client finds every type it needs to decode an
// error (google.rpc.Status, ErrorInfo, BadRequest). (`buf curl` itself prints error details with the types linked
// into its own binary, so it shows them as base64 whatever the server offers.)

const run = promisify(execFile);
const buf = path.resolve(import.meta.dirname, "../../node_modules/.bin/buf");

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

const curl = (args: string[]) =>
  run(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args], { timeout: 30_000 }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );

describe("server reflection", () => {
  it("lists the partner services over grpc.reflection.v1 and v1alpha", async () => {
    for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
      const res = await curl(["--reflect-protocol", protocol, "--list-services", t.partnerUrl]);
      expect(res.code, `${protocol}: ${res.err}`).toBe(0);
      const services = res.out.trim().split("\n");
      expect(services, protocol).toContain("partner.v1.SnapshotService");
      expect(services, protocol).toContain("partner.v1.DisbursementService");
      expect(services, protocol).toContain("partner.v1.ApiKeyService");
    }
  });

  it("resolves every type needed to decode an error: ErrorInfo decoded through v1alpha reflection alone", async () => {
    // A well-formed key that no partner holds.
    const { sandboxKey } = await createPartner(t);
    const unknown = `${sandboxKey.slice(0, -4)}${sandboxKey.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
    const failed = await grpcUnary(
      t.partnerUrl,
      KeysService.method.listKeys,
      {},
      {
        authorization: `Bearer ${unknown}`,
      },
    );
    expect(failed.ok).toBe(false);
    if (failed.ok) return;
    const bin = failed.metadata.get("grpc-status-details-bin")[0] as Buffer;

    // The descriptors, from the server only: google.rpc.Status and ErrorInfo by symbol (v1alpha).
    const files = await reflect(["google.rpc.Status", "google.rpc.ErrorInfo", "google.rpc.BadRequest"]);
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: dependenciesFirst(files) }));
    const statusDesc = registry.getMessage("google.rpc.Status");
    const infoDesc = registry.getMessage("google.rpc.ErrorInfo");
    expect(statusDesc && infoDesc && registry.getMessage("google.rpc.BadRequest")).toBeTruthy();
    if (!statusDesc || !infoDesc) return;
    const status = fromBinary(statusDesc, bin) as unknown as {
      details: { typeUrl: string; value: Uint8Array }[];
    };
    const detail = status.details.find((d) => d.typeUrl.endsWith("google.rpc.ErrorInfo"));
    expect(detail).toBeDefined();
    const info = fromBinary(infoDesc, detail?.value ?? new Uint8Array()) as unknown as { reason: string };
    expect(info.reason).toBe("invalid_api_key");
  });
});

/** FileDescriptorProtos of the files holding `symbols` (and their dependencies), over v1alpha reflection. */
async function reflect(symbols: string[]) {
  const client = new grpc.Client(new URL(t.partnerUrl).host, grpc.credentials.createInsecure());
  try {
    const call = client.makeBidiStreamRequest(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      (m: ServerReflectionRequest) => Buffer.from(toBinary(ServerReflectionRequestSchema, m)),
      (b: Buffer) => fromBinary(ServerReflectionResponseSchema, b),
    );
    const byName = new Map<string, ReturnType<typeof fromBinary<typeof FileDescriptorProtoSchema>>>();
    const done = new Promise<void>((resolve, reject) => {
      let answers = 0;
      call.on("data", (res: ServerReflectionResponse) => {
        if (res.messageResponse.case === "fileDescriptorResponse") {
          for (const bytes of res.messageResponse.value.fileDescriptorProto) {
            const file = fromBinary(FileDescriptorProtoSchema, bytes);
            byName.set(file.name, file);
          }
        }
        if (++answers === symbols.length) call.end();
      });
      call.on("error", reject);
      call.on("end", resolve);
    });
    for (const symbol of symbols)
      call.write(
        create(ServerReflectionRequestSchema, {
          messageRequest: { case: "fileContainingSymbol", value: symbol },
        }),
      );
    await done;
    return [...byName.values()];
  } finally {
    client.close();
  }
}

/** Files ordered so that each comes after the files it imports, as a descriptor set is read. */
function dependenciesFirst<F extends { name: string; dependency: string[] }>(files: F[]): F[] {
  const byName = new Map(files.map((f) => [f.name, f]));
  const out: F[] = [];
  const visit = (f: F | undefined) => {
    if (!f || out.includes(f)) return;
    for (const d of f.dependency) visit(byName.get(d));
    out.push(f);
  };
  for (const f of files) visit(f);
  return out;
}
