import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// HEAD on a GET route answers as GET would, without the body: link checkers, caches and monitors use it.

const doc = JSON.parse(
  readFileSync(path.resolve(import.meta.dirname, "../../gen/openapi/partner.v1.openapi.json"), "utf8"),
) as { paths: Record<string, Record<string, unknown>> };
const gets = Object.entries(doc.paths)
  .filter(([, ops]) => "get" in ops)
  .map(([template]) => template.replace(/\{[^}]+\}/g, "dsb_01M86Z0000000000000000000"));

let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

describe("HEAD", () => {
  it("answers every GET route with GET's status and headers and no body", async () => {
    expect(gets.length).toBeGreaterThan(5);
    for (const route of gets) {
      const headers = { authorization: `Bearer ${p.sandboxKey}` };
      const get = await fetch(`${t.partnerUrl}${route}`, { headers });
      const body = await get.arrayBuffer();
      const head = await fetch(`${t.partnerUrl}${route}`, { method: "HEAD", headers });
      expect(head.status, route).toBe(get.status);
      expect((await head.arrayBuffer()).byteLength, route).toBe(0);
      expect(head.headers.get("content-type"), route).toBe(get.headers.get("content-type"));
      if (get.status === 200 && head.headers.has("content-length"))
        expect(Number(head.headers.get("content-length")), route).toBe(body.byteLength);
    }
  });

  it("is listed in Allow beside GET", async () => {
    const res = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${p.sandboxKey}` },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});
