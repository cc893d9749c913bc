import {
  createRegistry,
  type DescFile,
  type DescService,
  type MessageInitShape,
  toBinary,
} from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { file_google_api_httpbody } from "../../../gen/google/api/httpbody_pb.ts";
import { file_google_rpc_error_details } from "../../../gen/google/rpc/error_details_pb.ts";
import { file_google_rpc_status } from "../../../gen/google/rpc/status_pb.ts";
import {
  ServerReflection,
  type ServerReflectionRequest,
  type ServerReflectionResponseSchema,
} from "../../../gen/grpc/reflection/v1/reflection_pb.ts";
import { ServerReflection as ServerReflectionV1Alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.ts";

type Response = MessageInitShape<typeof ServerReflectionResponseSchema>;

const NOT_FOUND = 5;
const UNIMPLEMENTED = 12;

/** Every file a file depends on, itself first, each once. */
function withDependencies(file: DescFile): DescFile[] {
  const seen = new Map<string, DescFile>();
  const visit = (f: DescFile) => {
    if (seen.has(f.name)) return;
    seen.set(f.name, f);
    for (const dep of f.dependencies) visit(dep);
  };
  visit(file);
  return [...seen.values()];
}

/**
 * Files a client needs to decode what the services send besides their own messages: the error details in
 * `grpc-status-details-bin` (`google.rpc.Status`, `ErrorInfo`, `BadRequest`) and `google.api.HttpBody`.
 */
const extraFiles = [file_google_rpc_status, file_google_rpc_error_details, file_google_api_httpbody];

/** Both names of the reflection service: `grpc.reflection.v1` and the older `v1alpha`, the same protocol. */
export const reflectionServices = [ServerReflection, ServerReflectionV1Alpha] as const;

/** What reflection answers from: the services served, their types, and their files by name. */
interface ReflectionIndex {
  all: DescService[];
  registry: ReturnType<typeof createRegistry>;
  filesByName: Map<string, DescFile>;
  /** A file and every file it depends on, each encoded once (and kept), or undefined for no file. */
  files: (file: DescFile | undefined) => Uint8Array[] | undefined;
}

/** The index of the services a listener serves, with the reflection services and the error details' files. */
function indexOf(services: DescService[]): ReflectionIndex {
  const all = [...services, ...reflectionServices];
  const registry = createRegistry(...all.map((s) => s.file), ...extraFiles);
  const filesByName = new Map<string, DescFile>();
  for (const f of [...all.map((s) => s.file), ...extraFiles])
    for (const d of withDependencies(f)) filesByName.set(d.name, d);
  const encoded = new Map<string, Uint8Array>();
  const encode = (f: DescFile) => {
    let bytes = encoded.get(f.name);
    if (!bytes) {
      bytes = toBinary(FileDescriptorProtoSchema, f.proto);
      encoded.set(f.name, bytes);
    }
    return bytes;
  };
  const files = (file: DescFile | undefined) => (file ? withDependencies(file).map(encode) : undefined);
  return { all, registry, filesByName, files };
}

/** The file that declares `symbol`: a type, a service, or a method (`package.Service.Method`). */
function fileOfSymbol({ registry }: ReflectionIndex, symbol: string): DescFile | undefined {
  const desc = registry.get(symbol);
  if (desc) return desc.file;
  // A method name: `package.Service.Method`.
  const owner = registry.getService(symbol.slice(0, symbol.lastIndexOf(".")));
  return owner?.methods.some((m) => `${owner.typeName}.${m.name}` === symbol) ? owner.file : undefined;
}

/** The answer to one reflection request. */
function answer(index: ReflectionIndex, req: ServerReflectionRequest): Response {
  const base = { validHost: req.host, originalRequest: req };
  const notFound = (what: string): Response => ({
    ...base,
    messageResponse: {
      case: "errorResponse" as const,
      value: { errorCode: NOT_FOUND, errorMessage: `${what} not found` },
    },
  });
  const fileResponse = (list: Uint8Array[] | undefined, what: string): Response =>
    list
      ? {
          ...base,
          messageResponse: {
            case: "fileDescriptorResponse" as const,
            value: { fileDescriptorProto: list },
          },
        }
      : notFound(what);
  const r = req.messageRequest;
  switch (r.case) {
    case "listServices":
      return {
        ...base,
        messageResponse: {
          case: "listServicesResponse",
          value: {
            service: index.all.map((s) => ({ name: s.typeName })),
          },
        },
      };
    case "fileByFilename":
      return fileResponse(index.files(index.filesByName.get(r.value)), `file ${r.value}`);
    case "fileContainingSymbol":
      return fileResponse(index.files(fileOfSymbol(index, r.value)), `symbol ${r.value}`);
    case "fileContainingExtension":
      return notFound(`extension ${r.value.containingType}(${r.value.extensionNumber})`);
    case "allExtensionNumbersOfType": {
      const message = index.registry.getMessage(r.value);
      if (!message) return notFound(`type ${r.value}`);
      return {
        ...base,
        messageResponse: {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: r.value, extensionNumber: [] },
        },
      };
    }
    default:
      return {
        ...base,
        messageResponse: {
          case: "errorResponse",
          value: { errorCode: UNIMPLEMENTED, errorMessage: "unsupported request" },
        },
      };
  }
}

/**
 * gRPC server reflection (`grpc.reflection.v1`, and `v1alpha` with the same answers) over the descriptors of
 * the services a listener serves and the error details they send, so `buf curl` and grpcurl work without the
 * proto files and show an error's `ErrorInfo` decoded.
 */
export function createReflection(services: DescService[]): ServiceImpl<typeof ServerReflection> {
  const index = indexOf(services);
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield answer(index, req);
    },
  };
}
