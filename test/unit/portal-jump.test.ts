import { describe, expect, it } from "vitest";
import { pathOfId, shortId } from "../../src/portal/web/ids.tsx";
import { pageOfId } from "../../src/portal/web/jump.tsx";

// The portal's "Go to an id" takes the first id that has a page, wherever it is in what was pasted.
describe("going to an id in the portal", () => {
  const ulid = "01M8FG4QWZME4J1JJJW4V38WPV";
  it("goes to the page of every kind of id the portal shows, from an id or text holding one", () => {
    expect(pageOfId(`req_${ulid}`)).toBe(`/requests/req_${ulid}`);
    expect(pageOfId(`{"code":"not_found","requestId":"req_${ulid}"}`)).toBe(`/requests/req_${ulid}`);
    expect(pageOfId(`  evt_${ulid} `)).toBe(`/events/evt_${ulid}`);
    expect(pageOfId(`dsb_${ulid}`)).toBe(`/disbursements/dsb_${ulid}`);
    expect(pageOfId(`whk_${ulid}`)).toBe(`/webhooks/whk_${ulid}`);
    expect(pageOfId(`"id": "dlv_${ulid}"`)).toBe(`/deliveries/dlv_${ulid}`);
    expect(pageOfId(`cns_${ulid}`)).toBe(`/consents/cns_${ulid}`);
    expect(pageOfId(`https://x.example/consent/cnl_${ulid}`)).toBe(`/consent-links/cnl_${ulid}`);
    // A user id is the platform's, not a ULID: letters and digits, up to 64.
    expect(pageOfId("user usr_ada42 owes")).toBe("/users/usr_ada42");
  });
  it("goes nowhere for text with no such id: another prefix, a short or lower-case one, an I, L, O or U", () => {
    for (const text of ["", "hello", `key_${ulid}`, "req_01M8FG", "req_01m8fg4qwzme4j1jjjw4v38wpv", "usr_"])
      expect(pageOfId(text)).toBeUndefined();
    expect(pageOfId("req_01M8FG4QWZME4J1JJJW4V38WPI")).toBeUndefined();
    expect(pathOfId(`rpy_${ulid}`)).toBeUndefined();
  });
  it("shortens an id to its prefix and its first and last four characters, and leaves a short one whole", () => {
    expect(shortId(`dsb_${ulid}`)).toBe("dsb_01M8…8WPV");
    expect(shortId("usr_ada42")).toBe("usr_ada42");
  });
});
