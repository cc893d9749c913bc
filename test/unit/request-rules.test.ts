import { create, createFileRegistry, setExtension } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FieldOptionsSchema,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import {
  FieldRulesSchema,
  field as fieldRules,
  file_buf_validate_validate,
} from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { describe, expect, it } from "vitest";
import { ApiKeyService } from "../../gen/partner/v1/api_keys_pb.ts";
import { ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { SandboxService } from "../../gen/partner/v1/sandbox_pb.ts";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { compileRequestRules } from "../../src/edge/validation.ts";

/** A service whose one request carries a CEL rule that does not parse. */
function serviceWithBrokenRule() {
  const options = create(FieldOptionsSchema);
  setExtension(
    options,
    fieldRules,
    create(FieldRulesSchema, { cel: [{ id: "broken", message: "never", expression: "this +" }] }),
  );
  const file = create(FileDescriptorProtoSchema, {
    name: "broken/v1/broken.proto",
    package: "broken.v1",
    syntax: "proto3",
    dependency: ["buf/validate/validate.proto"],
    messageType: [
      {
        name: "DoRequest",
        field: [
          {
            name: "name",
            jsonName: "name",
            number: 1,
            type: FieldDescriptorProto_Type.STRING,
            label: FieldDescriptorProto_Label.OPTIONAL,
            options,
          },
        ],
      },
    ],
    service: [
      {
        name: "BrokenService",
        method: [{ name: "Do", inputType: ".broken.v1.DoRequest", outputType: ".broken.v1.DoRequest" }],
      },
    ],
  });
  const registry = createFileRegistry(file, (name) =>
    name === "buf/validate/validate.proto" ? file_buf_validate_validate : undefined,
  );
  const service = registry.getService("broken.v1.BrokenService");
  if (!service) throw new Error("the broken service was not built");
  return service;
}

describe("the request rules, compiled before the listeners open", () => {
  it("compile for every request the partner and portal services take", () => {
    expect(() =>
      compileRequestRules([
        ApiKeyService,
        ConsentService,
        DisbursementService,
        KeysService,
        SandboxService,
        SnapshotService,
        WebhookService,
        PortalAuthService,
        TeamService,
      ]),
    ).not.toThrow();
  });

  it("stop the start-up when one cannot compile, instead of answering internal to every such request", () => {
    const broken = serviceWithBrokenRule();
    expect(() => compileRequestRules([broken])).toThrow(/broken|compil|parse/i);
  });
});
