import {
  create,
  type DescMessage,
  type DescMethodUnary,
  type MessageInitShape,
  toJson,
} from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import { ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { SandboxService } from "../../gen/partner/v1/sandbox_pb.ts";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { grpcUnary, rest } from "../support/clients.ts";

let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

/** What every face must answer: the contract's code, its HTTP status, and the details (fields and all). */
interface Expected {
  status: number;
  code: string;
  details?: Record<string, unknown>;
}

/** One request that breaks a rule, with its REST path (path fields filled in from the message). */
interface Case<I extends DescMessage> {
  name: string;
  method: DescMethodUnary<I>;
  verb: "GET" | "POST" | "PATCH";
  path: string;
  request: MessageInitShape<I>;
  expected: Expected;
}

const long = (n: number) => "x".repeat(n);
const fakeId = (prefix: string) => `${prefix}_01J00000000000000000000000`;
const link = { phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: 30 };
const fields = (f: Record<string, string>) => ({ fields: f });

const cases: Case<DescMessage>[] = [
  {
    name: "a phone number not in E.164",
    method: ConsentService.method.createConsentLink,
    verb: "POST",
    path: "/partner/v1/consent-links",
    request: { ...link, phoneNumber: "08012345678" },
    expected: { status: 400, code: "invalid_phone_number" },
  },
  {
    name: "an unknown scope",
    method: ConsentService.method.createConsentLink,
    verb: "POST",
    path: "/partner/v1/consent-links",
    request: { ...link, scopes: ["standing", "salary"] },
    expected: {
      status: 400,
      code: "invalid_scope",
      details: {
        invalid: ["salary"],
        scopes: [
          "standing",
          "signals.standing",
          "signals.work",
          "signals.cashflow",
          "ledger",
          "kyc",
          "repayment_history",
        ],
      },
    },
  },
  {
    name: "no scope, windows and hours out of range, a redirect too long",
    method: ConsentService.method.createConsentLink,
    verb: "POST",
    path: "/partner/v1/consent-links",
    request: {
      ...link,
      scopes: [],
      ledgerWindowDays: 366,
      maxLedgerWindowDays: -1,
      expiresInHours: 0,
      redirectUrl: `https://a.example/${long(2048)}`,
    },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        scopes: "ask for at least one scope",
        ledgerWindowDays: "must be 1 to 365 days",
        maxLedgerWindowDays: "must be 1 to 365 days",
        expiresInHours: "must be 1 to 168",
        redirectUrl: "must be at most 2048 characters",
      }),
    },
  },
  {
    name: "a ledger window of 0 days",
    method: SnapshotService.method.getSnapshot,
    verb: "GET",
    path: "/partner/v1/users/usr_sandboxTrusted/snapshot?ledger_window_days=0",
    request: { userId: "usr_sandboxTrusted", ledgerWindowDays: 0 },
    expected: { status: 400, code: "invalid_ledger_window" },
  },
  {
    name: "a webhook without URL or events, with a description too long",
    method: WebhookService.method.createWebhook,
    verb: "POST",
    path: "/partner/v1/webhooks",
    request: { url: "", events: [], description: long(501) },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        url: "not an absolute URL",
        events: "subscribe to at least one event type or filter",
        description: "must be at most 500 characters",
      }),
    },
  },
  {
    name: "21 filters, some unknown: the count answers",
    method: WebhookService.method.createWebhook,
    verb: "POST",
    path: "/partner/v1/webhooks",
    request: { url: "https://hooks.example.com/x", events: Array.from({ length: 21 }, (_, i) => `bad${i}`) },
    expected: { status: 422, code: "validation_failed", details: fields({ events: "at most 20 filters" }) },
  },
  {
    name: "an unknown filter on update",
    method: WebhookService.method.updateWebhook,
    verb: "PATCH",
    path: `/partner/v1/webhooks/${fakeId("whk")}`,
    request: { id: fakeId("whk"), addEvents: ["consent.*", "loan.*"] },
    expected: {
      status: 400,
      code: "invalid_event_type",
      details: {
        field: "addEvents",
        invalid: ["loan.*"],
        eventTypes: [
          "consent.granted",
          "consent.revoked",
          "standing.tier_changed",
          "DISBURSEMENT_DELIVERED",
          "REPAYMENT_COLLECTED",
          "REPAYMENT_FAILED",
        ],
      },
    },
  },
  {
    name: "an unknown test event type",
    method: WebhookService.method.sendTestEvent,
    verb: "POST",
    path: `/partner/v1/webhooks/${fakeId("whk")}/test`,
    request: { id: fakeId("whk"), eventType: "consent.*" },
    expected: {
      status: 400,
      code: "invalid_event_type",
      details: {
        eventTypes: [
          "consent.granted",
          "consent.revoked",
          "standing.tier_changed",
          "DISBURSEMENT_DELIVERED",
          "REPAYMENT_COLLECTED",
          "REPAYMENT_FAILED",
        ],
      },
    },
  },
  {
    name: "a page of deliveries too large, after something that is no delivery id",
    method: WebhookService.method.listDeliveries,
    verb: "GET",
    path: `/partner/v1/webhooks/${fakeId("whk")}/deliveries?limit=101&starting_after=whk_1`,
    request: { webhookId: fakeId("whk"), limit: 101, startingAfter: "whk_1" },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        limit: "must be 1 to 100",
        startingAfter: "must be a delivery id from a previous page",
      }),
    },
  },
  {
    name: "books from a day not written YYYY-MM-DD, a page too large",
    method: DisbursementService.method.getBooks,
    verb: "GET",
    path: "/partner/v1/books?from=2026-1-1&limit=1001",
    request: { from: "2026-1-1", limit: 1001 },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        from: "must be a real date YYYY-MM-DD from 1970-01-01 to 9999-12-30",
        limit: "must be 1 to 1000",
      }),
    },
  },
  {
    name: "a disbursement with nothing right",
    method: DisbursementService.method.createDisbursement,
    verb: "POST",
    path: "/partner/v1/disbursements",
    request: {
      userId: "usr_sandboxTrusted",
      principalKobo: 0n,
      reference: "a b",
      acceptanceExpiresInHours: 169,
    },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        principalKobo: "must be 1 to 1000000000000 kobo",
        destination: "must be WALLET or BANK",
        reference: "must be 1 to 64 visible ASCII characters",
        repaymentSchedule: "must have 1 to 60 installments",
        acceptanceExpiresInHours: "must be 1 to 168 (hours)",
      }),
    },
  },
  {
    name: "installments with a malformed date and a zero amount",
    method: DisbursementService.method.createDisbursement,
    verb: "POST",
    path: "/partner/v1/disbursements",
    request: {
      userId: "usr_sandboxTrusted",
      principalKobo: 100n,
      destination: 1,
      reference: "loan-1",
      repaymentSchedule: { installments: [{ dueDate: "next week", amountKobo: 0n }] },
    },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        "repaymentSchedule.installments[0].dueDate": "must be a real date YYYY-MM-DD",
        "repaymentSchedule.installments[0].amountKobo": "must be positive",
      }),
    },
  },
  {
    name: "an unknown tier and a score out of range",
    method: SandboxService.method.setStanding,
    verb: "POST",
    path: "/partner/v1/sandbox/users/usr_sandboxTrusted/standing",
    request: { userId: "usr_sandboxTrusted", tier: "Gold", score: 1001 },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        tier: "must be one of Unrated, Emerging, Established, Trusted",
        score: "must be 0 to 1000",
      }),
    },
  },
  {
    name: "a collection without outcome, with a failure code not in snake_case",
    method: SandboxService.method.collectRepayment,
    verb: "POST",
    path: `/partner/v1/sandbox/repayments/${fakeId("rpy")}/collect`,
    request: { id: fakeId("rpy"), failureCode: "Bad Code" },
    expected: {
      status: 422,
      code: "validation_failed",
      details: fields({
        outcome: "must be SUCCESS or FAILURE",
        failureCode: "must be a snake_case code of up to 64 characters",
      }),
    },
  },
];

/** The REST body of a request: its proto3 JSON without the fields the path carries. */
function restBody(c: Case<DescMessage>): Record<string, unknown> | undefined {
  if (c.verb === "GET") return undefined;
  const json = toJson(c.method.input, create(c.method.input, c.request)) as Record<string, unknown>;
  const request = c.request as Record<string, unknown>;
  for (const f of c.method.input.fields) {
    if (
      c.path.includes(`/${String(request[f.localName])}/`) ||
      c.path.endsWith(`/${String(request[f.localName])}`)
    )
      delete json[f.jsonName];
  }
  return json;
}

const detailsOf = (info: { metadata: Record<string, string> } | undefined) =>
  info?.metadata.details ? JSON.parse(info.metadata.details) : undefined;

describe("the contract's protovalidate rules", () => {
  it.each(cases.map((c) => [c.name, c] as const))(
    "refuse %s alike on REST, Connect and gRPC",
    async (_, c) => {
      const { status, code, details } = c.expected;

      const viaRest = await rest(t.partnerUrl, c.verb, c.path, { key: p.sandboxKey, body: restBody(c) });
      expect(viaRest.status).toBe(status);
      expect(viaRest.body.code).toBe(code);
      expect(viaRest.body.details).toEqual(details);

      const transport = createConnectTransport({ baseUrl: t.partnerUrl, httpVersion: "1.1" });
      const err = await transport
        .unary(
          c.method,
          undefined,
          undefined,
          { authorization: `Bearer ${p.sandboxKey}` },
          c.request as never,
        )
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(ConnectError);
      const connectError = err as ConnectError;
      expect(connectError.code).toBe(Code.InvalidArgument);
      const info = connectError.findDetails(ErrorInfoSchema)[0];
      expect(info?.reason).toBe(code);
      expect(detailsOf(info)).toEqual(details);

      const viaGrpc = await grpcUnary(t.partnerUrl, c.method, c.request, {
        authorization: `Bearer ${p.sandboxKey}`,
      });
      expect(viaGrpc.ok).toBe(false);
      if (viaGrpc.ok) return;
      expect(viaGrpc.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(viaGrpc.errorInfo?.reason).toBe(code);
      expect(detailsOf(viaGrpc.errorInfo)).toEqual(details);
    },
  );
});
