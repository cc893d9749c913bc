import { readFileSync } from "node:fs";
import path from "node:path";
import { type DescField, type DescMessage, hasOption, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import {
  field as fieldRules,
  file_buf_validate_validate,
} from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { describe, expect, it } from "vitest";
import { file_buf_validate_validate as generated } from "../../gen/buf/validate/validate_pb.ts";
import { file_partner_v1_consents } from "../../gen/partner/v1/consents_pb.ts";
import { file_partner_v1_disbursements } from "../../gen/partner/v1/disbursements_pb.ts";
import { file_partner_v1_sandbox } from "../../gen/partner/v1/sandbox_pb.ts";
import { file_partner_v1_snapshots } from "../../gen/partner/v1/snapshots_pb.ts";
import { file_partner_v1_webhooks } from "../../gen/partner/v1/webhooks_pb.ts";
import { printValidateProto } from "../../scripts/protovalidate-proto.ts";
import { reportedFields } from "../../src/edge/validation.ts";

const root = path.resolve(import.meta.dirname, "../..");
const doc = JSON.parse(readFileSync(path.join(root, "gen/openapi/partner.v1.openapi.json"), "utf8"));
const schema = (name: string) => doc.components.schemas[name];
const files = [
  file_partner_v1_consents,
  file_partner_v1_disbursements,
  file_partner_v1_sandbox,
  file_partner_v1_snapshots,
  file_partner_v1_webhooks,
];
const ruled: DescField[] = files
  .flatMap((f) => f.messages)
  .flatMap((m: DescMessage) => m.fields)
  .filter((f) => hasOption(f, fieldRules));

describe("buf/validate/validate.proto, printed from @bufbuild/protovalidate", () => {
  it("compiles back, through buf generate, to the very descriptor the validator runs on", () => {
    // Byte for byte: gen/ embeds what the validator's own package embeds, so the rules buf checked, the rules
    // the generated clients carry and the rules the server enforces are read against one definition.
    const embedded = (f: typeof generated) => Buffer.from(toBinary(FileDescriptorProtoSchema, f.proto));
    expect(embedded(generated).equals(embedded(file_buf_validate_validate))).toBe(true);
  });

  it("is the file buf.yaml's module holds (written by npm install)", () => {
    const written = readFileSync(
      path.join(root, "node_modules/.protovalidate/proto/buf/validate/validate.proto"),
      "utf8",
    );
    expect(written).toBe(printValidateProto());
  });
});

describe("the partner protos' rules", () => {
  it("are on the fields the edge validated before", () => {
    expect(ruled.length).toBeGreaterThan(25);
  });

  it("each answer in the contract's own words, never the validator's", () => {
    // A rule added without its words would answer with the validator's own message ("value must …").
    const missing = ruled.map((f) => `${f.parent.typeName}.${f.name}`).filter((n) => !reportedFields.has(n));
    expect(missing).toEqual([]);
  });
});

describe("the OpenAPI document carries the rules", () => {
  it("ranges, lengths, patterns and required fields of request bodies", () => {
    const link = schema("partner.v1.CreateConsentLinkRequest");
    expect(link.required).toEqual(["phoneNumber", "scopes", "ledgerWindowDays"]);
    expect(link.properties.phoneNumber.pattern).toBe("^\\+[1-9][0-9]{7,14}$");
    expect(link.properties.scopes.minItems).toBe(1);
    expect(link.properties.scopes.items.enum).toContain("repayment_history");
    expect(link.properties.ledgerWindowDays).toMatchObject({ minimum: 1, maximum: 365 });
    expect(link.properties.expiresInHours).toMatchObject({ minimum: 1, maximum: 168 });
    expect(link.properties.redirectUrl.maxLength).toBe(2048);
    // 0 means "the default": the zero value, or a value within the rule; null (proto3 JSON) is the default too.
    expect(link.properties.maxLedgerWindowDays.anyOf).toEqual([
      { const: 0 },
      { minimum: 1, maximum: 365 },
      { type: "null" },
    ]);

    const hook = schema("partner.v1.CreateWebhookRequest");
    expect(hook.required).toEqual(["url", "events"]);
    expect(hook.properties.events).toMatchObject({ minItems: 1, maxItems: 20 });
    expect(hook.properties.events.items.enum).toEqual(
      expect.arrayContaining(["*", "consent.*", "REPAYMENT_FAILED"]),
    );
    expect(hook.properties.description.maxLength).toBe(500);

    const loan = schema("partner.v1.CreateDisbursementRequest");
    expect(loan.required).toEqual(["principalKobo", "destination", "reference", "repaymentSchedule"]);
    // Money: a decimal string whose range is its pattern, or a JSON number within the same range.
    expect(loan.properties.principalKobo).toMatchObject({
      type: ["string", "integer"],
      pattern: "^(?:[1-9][0-9]{0,11}|1000000000000)$",
      minimum: 1,
      maximum: 1_000_000_000_000,
    });
    // The enum narrowed to what the rule allows: no DESTINATION_UNSPECIFIED.
    expect(loan.properties.destination.enum).toEqual(["WALLET", "BANK"]);
    expect(loan.properties.reference.pattern).toBe("^[\\x21-\\x7e]{1,64}$");
    expect(schema("partner.v1.RepaymentSchedule").properties.installments).toMatchObject({
      minItems: 1,
      maxItems: 60,
    });
    const installment = schema("partner.v1.Installment").properties;
    expect(installment.amountKobo.minimum).toBe(1);
    expect(new RegExp(installment.amountKobo.pattern).test("0")).toBe(false);
    expect(installment.dueDate.format).toBe("date");

    const standing = schema("partner.v1.SetStandingRequest.Body");
    expect(standing.properties.tier.enum).toEqual(["Unrated", "Emerging", "Established", "Trusted"]);
    expect(standing.properties.score).toMatchObject({ minimum: 0, maximum: 1000 });
    expect(schema("partner.v1.CollectRepaymentRequest.Body").required).toEqual(["outcome"]);
  });

  it("on query parameters", () => {
    const param = (p: string, name: string) =>
      doc.paths[p].get.parameters.find((x: { name: string }) => x.name === name);
    expect(param("/partner/v1/users/{user_id}/snapshot", "ledger_window_days").schema).toMatchObject({
      minimum: 1,
      maximum: 365,
    });
    expect(param("/partner/v1/webhooks/{webhook_id}/deliveries", "limit").schema.anyOf).toEqual([
      { const: 0 },
      { minimum: 1, maximum: 100 },
    ]);
    expect(param("/partner/v1/books", "limit").schema.anyOf[1]).toEqual({ minimum: 1, maximum: 1000 });
    expect(param("/partner/v1/books", "from").schema.anyOf[1]).toMatchObject({ format: "date" });
    const from = new RegExp(param("/partner/v1/books", "from").schema.anyOf[1].pattern);
    expect(["1970-01-01", "9999-12-30"].map((d) => from.test(d))).toEqual([true, true]);
    expect(["1969-12-31", "9999-12-31", "2026-1-1"].map((d) => from.test(d))).toEqual([false, false, false]);
  });
});
