import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// Many HTTP clients send `{}` (or an empty body) whatever the method: a method that takes no body fields must
// take both, on REST and on Connect, and still refuse a body that says something.

const doc = JSON.parse(
  readFileSync(path.resolve(import.meta.dirname, "../../gen/openapi/partner.v1.openapi.json"), "utf8"),
) as { paths: Record<string, Record<string, { requestBody?: unknown; operationId: string }>> };

/** Every REST operation that writes and takes no body, from the published document. */
const noBody = Object.entries(doc.paths).flatMap(([template, ops]) =>
  Object.entries(ops)
    .filter(([verb, op]) => ["post", "put", "patch", "delete"].includes(verb) && !op.requestBody)
    .map(([verb, op]) => ({
      verb: verb.toUpperCase(),
      path: template.replace(/\{[^}]+\}/g, "dsb_01M86Z0000000000000000000"),
      op: op.operationId,
    })),
);

let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const send = (method: string, url: string, body: string | undefined, type = "application/json") =>
  fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${p.sandboxKey}`,
      ...(body === undefined ? {} : { "content-type": type }),
    },
    body,
  });

describe("methods without body fields", () => {
  it("are found in the document (the test covers something)", () => {
    expect(noBody.length).toBeGreaterThanOrEqual(5);
  });

  it("take `{}` and an empty body over REST, and refuse a body with fields", async () => {
    for (const { verb, path: p2, op } of noBody) {
      for (const body of ["{}", " { } \n", "", undefined]) {
        const res = await send(verb, `${t.partnerUrl}${p2}`, body);
        const json = (await res.json().catch(() => ({}))) as { code?: string };
        // The id is made up: what matters is that the body was not the problem.
        expect(json.code, `${op} with ${JSON.stringify(body)}: ${res.status}`).not.toBe("invalid_request");
        expect(res.status, op).toBeLessThan(500);
      }
      const res = await send(verb, `${t.partnerUrl}${p2}`, '{"unexpected":1}');
      expect(res.status, `${op} with a field`).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe("invalid_request");
    }
  });

  it("take `{}` and an empty body over Connect JSON", async () => {
    for (const body of ["{}", ""]) {
      const res = await send("POST", `${t.partnerUrl}/partner.v1.KeysService/ListKeys`, body);
      expect(res.status, `${JSON.stringify(body)}: ${await res.clone().text()}`).toBe(200);
      expect(((await res.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    }
  });
});
