import { readFileSync } from "node:fs";
import path from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { openApiProblems } from "../support/openapi-check.ts";

const generated = readFileSync(
  path.resolve(import.meta.dirname, "../../gen/openapi/partner.v1.openapi.json"),
  "utf8",
);
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

describe("the OpenAPI document", () => {
  it("is served at /partner/v1/openapi.json without a key, and is valid OpenAPI 3.1", async () => {
    const res = await fetch(`${t.partnerUrl}/partner/v1/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const text = await res.text();
    expect(text).toBe(generated);
    const doc = JSON.parse(text);
    expect(doc.openapi).toBe("3.1.0");
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("lists exactly the server's REST routes", async () => {
    const doc = JSON.parse(generated) as { paths: Record<string, Record<string, unknown>> };
    const documented = Object.entries(doc.paths)
      .flatMap(([p, verbs]) => Object.keys(verbs).map((v) => `${v.toUpperCase()} ${p}`))
      .sort();
    // The server's templates may bind a segment (`{id=*}`); the document names the parameter only.
    const served = t.app.routes.map((r) => r.replace(/\{([a-z0-9_.]+)=[^}]*\}/g, "{$1}")).sort();
    expect(served.length).toBeGreaterThan(20);
    expect(documented).toEqual(served);
  });

  it("says which operations need an Idempotency-Key, and documents the error body", () => {
    const doc = JSON.parse(generated);
    const create = doc.paths["/partner/v1/disbursements"].post;
    expect(create.parameters).toContainEqual(
      expect.objectContaining({ name: "Idempotency-Key", required: true }),
    );
    const webhook = doc.paths["/partner/v1/webhooks"].post;
    expect(webhook.parameters).toContainEqual(
      expect.objectContaining({ name: "Idempotency-Key", required: false }),
    );
    expect(Object.keys(doc.components.schemas["partner.v1.Error"].properties)).toEqual([
      "code",
      "message",
      "requestId",
      "details",
    ]);
    // Money is kobo as decimal strings, as the JSON the server writes.
    expect(doc.components.schemas["partner.v1.Disbursement"].properties.principalKobo.type).toBe("string");
  });

  it("has a reference page for people, with every operation on it", async () => {
    const res = await fetch(`${t.partnerUrl}/partner/v1/reference`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await res.text();
    const doc = JSON.parse(generated) as { paths: Record<string, Record<string, { operationId: string }>> };
    for (const verbs of Object.values(doc.paths))
      for (const op of Object.values(verbs)) expect(html).toContain(`id="${op.operationId}"`);
    expect(html).not.toContain("<script");
    expect((await fetch(`${t.partnerUrl}/partner/v1/reference`, { method: "POST" })).status).toBe(405);
  });

  it("stands alone for a partner: says how to authenticate, and cites no document a partner does not have", async () => {
    const html = await (await fetch(`${t.partnerUrl}/partner/v1/reference`)).text();
    for (const text of [generated, html]) {
      expect(text).toContain("Authorization: Bearer");
      expect(text).toContain("sk_sandbox_");
      expect(text).not.toMatch(/SPEC\.md|CONTRACT\.md|CONTRACT §/);
      // Keys come from the partner's own portal, not from the operator.
      expect(text).toContain("partner portal");
      expect(text).not.toContain("issued by the platform's operator");
    }
    // Rendered, not shown as markdown.
    expect(html).toContain("<strong>Authentication.</strong>");
    expect(html).not.toContain("**");
  });

  it("tells a malformed key (401 unauthenticated) from a well-formed unknown one (401 invalid_api_key), on every operation", () => {
    const doc = JSON.parse(generated) as {
      info: { description: string };
      paths: Record<string, Record<string, { responses: Record<string, { content: any }> }>>;
    };
    expect(doc.info.description).toMatch(/`sk_sandbox_wrong` is not\), is `401 unauthenticated`/);
    expect(doc.info.description).toMatch(
      /a well-formed key that is not one of ours is `401 invalid_api_key`/,
    );
    for (const [path, verbs] of Object.entries(doc.paths))
      for (const [verb, op] of Object.entries(verbs)) {
        const codes = op.responses["401"]?.content["application/json"].schema.allOf[1].properties.code.enum;
        expect(codes, `${verb} ${path}`).toEqual(
          expect.arrayContaining([
            "unauthenticated",
            "invalid_api_key",
            "api_key_revoked",
            "api_key_expired",
          ]),
        );
      }
  });

  it("is what every REST answer of the tests is checked against, and the check catches a body that breaks it", async () => {
    const p = await createPartner(t);
    const keys = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
    expect(openApiProblems("GET", "/partner/v1/keys", 200, keys.body)).toEqual([]);
    // A key without its kid, an unknown status, a number where a string belongs: each is reported.
    const [first] = keys.body.keys;
    const { kid: _, ...noKid } = first;
    expect(openApiProblems("GET", "/partner/v1/keys", 200, { keys: [noKid] }).join()).toMatch(/kid/);
    expect(
      openApiProblems("GET", "/partner/v1/keys", 200, { keys: [{ ...first, status: "RETIRED_FOREVER" }] }),
    ).not.toEqual([]);
    // Each operation lists the statuses and codes it answers: another code, or another status, is reported.
    const error = { code: "invalid_api_key", message: "m", requestId: "req_x" };
    expect(openApiProblems("GET", "/partner/v1/keys", 401, error)).toEqual([]);
    expect(
      openApiProblems("GET", "/partner/v1/keys", 401, { ...error, code: "consent_required" }),
    ).not.toEqual([]);
    expect(openApiProblems("GET", "/partner/v1/keys", 410, { ...error, code: "mandate_gone" })).not.toEqual(
      [],
    );
    // An error body must be the Error schema too.
    expect(openApiProblems("GET", "/partner/v1/keys", 401, { code: 401 })).not.toEqual([]);
    // A snapshot with a null the scope rule never yields, or a group that is neither absent nor an object.
    const doc = {
      snapshotId: "snp_x",
      userId: "u",
      environment: "sandbox",
      consentId: "c",
      generatedAt: "t",
    };
    expect(
      openApiProblems("GET", "/partner/v1/users/u/snapshot", 200, {
        ...doc,
        standing: null,
        userId: null,
        signals: {},
        signature: {},
      }),
    ).not.toEqual([]);
  });

  it("links each create to the operations on what it created, through a pointer that resolves in a real answer", async () => {
    const doc = JSON.parse(generated);
    const links = doc.paths["/partner/v1/webhooks"].post.responses["200"].links;
    expect(Object.keys(links).sort()).toEqual([
      "WebhookService_DeleteWebhook",
      "WebhookService_GetWebhook",
      "WebhookService_UpdateWebhook",
    ]);
    expect(
      doc.paths["/partner/v1/disbursements"].post.responses["200"].links.DisbursementService_GetDisbursement,
    ).toEqual({
      operationId: "DisbursementService_GetDisbursement",
      parameters: { id: "$response.body#/id" },
    });
    const p = await createPartner(t);
    const link =
      doc.paths["/partner/v1/consent-links"].post.responses["200"].links.ConsentService_GetConsentLink;
    const created = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
      key: p.sandboxKey,
      body: { phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: 30 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const pointer = String(link.parameters.id).replace("$response.body#/", "");
    const fetched = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${created.body[pointer]}`, {
      key: p.sandboxKey,
    });
    expect(fetched.status).toBe(200);
  });
});
