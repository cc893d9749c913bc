import { describe, expect, it } from "vitest";
import { pageOfId } from "../../src/portal/web/jump.tsx";

// The portal's "Go to an id" takes the first id of a kind it shows, wherever it is in what was pasted.
describe("going to an id in the portal", () => {
  it("goes to the page of a request, an event, a disbursement or a webhook, from an id or text holding one", () => {
    const ulid = "01M8FG4QWZME4J1JJJW4V38WPV";
    expect(pageOfId(`req_${ulid}`)).toBe(`/requests/req_${ulid}`);
    expect(pageOfId(`{"code":"not_found","requestId":"req_${ulid}"}`)).toBe(`/requests/req_${ulid}`);
    expect(pageOfId(`  evt_${ulid} `)).toBe(`/events/evt_${ulid}`);
    expect(pageOfId(`dsb_${ulid}`)).toBe(`/disbursements/dsb_${ulid}`);
    expect(pageOfId(`whk_${ulid}`)).toBe(`/webhooks/whk_${ulid}`);
  });
  it("goes nowhere for text with no such id: another prefix, a short or lower-case one, an I, L, O or U", () => {
    for (const text of [
      "",
      "hello",
      "usr_01M8FG4QWZME4J1JJJW4V38WPV",
      "req_01M8FG",
      "req_01m8fg4qwzme4j1jjjw4v38wpv",
    ])
      expect(pageOfId(text)).toBeUndefined();
    expect(pageOfId("req_01M8FG4QWZME4J1JJJW4V38WPI")).toBeUndefined();
  });
});
