import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// Compressed request bodies: a body that inflates past the 1 MiB limit (a decompression bomb: 50 MB of JSON in
// 50 KB of gzip) is 413 payload_too_large on REST and on Connect, refused without inflating it whole; a
// well-formed compressed body is read as any other; the service keeps serving.

let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const bomb = gzipSync(Buffer.from(`{"phoneNumber":"${" ".repeat(50_000_000)}"}`));
const link = { phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: 30 };

const send = (path: string, body: Buffer, headers: Record<string, string>) =>
  fetch(`${t.partnerUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${p.sandboxKey}`, "content-type": "application/json", ...headers },
    body: new Uint8Array(body),
  });

describe("compressed request bodies", () => {
  it("are 413 payload_too_large when they inflate past the limit, on REST and Connect, and the service keeps serving", async () => {
    expect(bomb.length).toBeLessThan(100_000);
    const rest = await send("/partner/v1/consent-links", bomb, { "content-encoding": "gzip" });
    expect(rest.status).toBe(413);
    expect((await rest.json()).code).toBe("payload_too_large");

    const connect = await send("/partner.v1.ConsentService/CreateConsentLink", bomb, {
      "content-encoding": "gzip",
      "connect-protocol-version": "1",
    });
    expect(connect.status).toBe(413);
    const error = await connect.json();
    expect(error.code).toBe("resource_exhausted");
    expect(JSON.stringify(error.details)).toContain("ErrorInfo");

    // Past the limit before compression too: 413 on Connect, not the protocol's 429 (which says "retry").
    const plain = await send(
      "/partner.v1.ConsentService/CreateConsentLink",
      Buffer.from(JSON.stringify({ ...link, phoneNumber: " ".repeat(2_000_000) })),
      { "connect-protocol-version": "1" },
    );
    expect(plain.status).toBe(413);

    expect((await fetch(`${t.partnerUrl}/readyz`)).status).toBe(200);
  });

  it("are read like any other when well formed; an unknown encoding is 415 and bad gzip 400", async () => {
    const ok = await send("/partner/v1/consent-links", gzipSync(JSON.stringify(link)), {
      "content-encoding": "gzip",
    });
    expect(ok.status, await ok.clone().text()).toBe(200);
    expect((await ok.json()).id).toMatch(/^cnl_/);
    const unknown = await send("/partner/v1/consent-links", Buffer.from(JSON.stringify(link)), {
      "content-encoding": "zstd",
    });
    expect(unknown.status).toBe(415);
    const broken = await send("/partner/v1/consent-links", Buffer.from("not gzip at all"), {
      "content-encoding": "gzip",
    });
    expect(broken.status).toBe(400);
    expect((await broken.json()).code).toBe("invalid_request");
  });
});
