import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import type { ResolvedAddress } from "../../src/webhooks/destination.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { eventually } from "../support/wait.ts";

// The production setting (no local webhooks), with DNS answers the test controls.
const dns = new Map<string, string>();
const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  const address = dns.get(host);
  if (!address) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
  return [{ address, family: address.includes(":") ? 6 : 4 }];
};

let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp({ resolver, config: { allowLocalWebhooks: false } });
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const create = (url: string) =>
  rest(t.partnerUrl, "POST", "/partner/v1/webhooks", { key: p.sandboxKey, body: { url, events: ["*"] } });

describe("webhook destinations in production", () => {
  it("refuses hosts that resolve to loopback, private, metadata or IPv4-mapped private addresses", async () => {
    const cases = {
      "loopback.example": "127.0.0.1",
      "private.example": "10.0.0.1",
      "metadata.example": "169.254.169.254",
      "mapped.example": "::ffff:10.0.0.1",
      "compatible.example": "::7f00:1",
      "translated.example": "::ffff:0:a00:1",
      "nat64.example": "64:ff9b::a9fe:a9fe",
      "local-nat64.example": "64:ff9b:1::1",
      "sixtofour.example": "2002:7f00:1::1",
      "unique-local.example": "fd00::1",
      "not-global.example": "4000::1",
    };
    for (const [host, address] of Object.entries(cases)) {
      dns.set(host, address);
      const res = await create(`https://${host}/hooks`);
      expect(res.status, host).toBe(422);
      expect(res.body.code).toBe("validation_failed");
      // Said without what the name resolved to: that would map the service's own network.
      expect(res.body.details.fields.url).toBe(`${host} is not a public address, so it is not allowed`);
      expect(JSON.stringify(res.body)).not.toContain(address);
    }
    for (const url of [
      "https://127.0.0.1/hooks",
      "https://10.0.0.1/hooks",
      "https://169.254.169.254/latest",
      "https://[::ffff:10.0.0.1]/hooks",
      "https://[::7f00:1]/hooks",
      "https://[::ffff:0:7f00:1]/hooks",
      "https://[64:ff9b:1::a00:1]/hooks",
      "https://[2002:a00:1::]/hooks",
      "https://[2002:7f00:1::1]/hooks",
    ]) {
      expect((await create(url)).status, url).toBe(422);
    }
  });

  it("requires https and a resolvable host", async () => {
    dns.set("public.example", "93.184.216.34");
    expect((await create("http://public.example/hooks")).body.details.fields.url).toContain("https");
    expect((await create("https://nowhere.example/hooks")).body.details.fields.url).toContain(
      "does not resolve",
    );
    expect((await create("https://public.example/hooks")).status).toBe(200);
  });

  it("checks the address again at send time and refuses a host that now resolves privately", async () => {
    dns.set("rebind.example", "93.184.216.34");
    const created = await create("https://rebind.example/hooks");
    expect(created.status).toBe(200);
    for (const address of ["127.0.0.1", "::ffff:10.0.0.1"]) {
      dns.set("rebind.example", address);
      const sent = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${created.body.id}/test`, {
        key: p.sandboxKey,
        body: {},
      });
      const attempt = await eventually(async () => {
        const rows = await sql<{ error: string; status_code: number | null }>(
          t.app.orm.em.fork(),
          "select error, status_code from webhook_attempts where delivery_id = $1",
          [sent.body.id],
        );
        return rows[0];
      });
      expect(attempt).toEqual({ error: "destination_not_allowed", status_code: null });
    }
  });
});
