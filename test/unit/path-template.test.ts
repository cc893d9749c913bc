import { describe, expect, it } from "vitest";
import { compileTemplate } from "../../src/platform/http/path-template.ts";

describe("google.api.http path templates", () => {
  it("matches literals and single-segment variables", () => {
    const t = compileTemplate("/partner/v1/users/{user_id}/snapshot");
    expect(t.match("/partner/v1/users/usr_123/snapshot")).toEqual({ user_id: "usr_123" });
    expect(t.match("/partner/v1/users/usr_123/snapshot/")).toEqual({ user_id: "usr_123" });
    expect(t.match("/partner/v1/users/a/b/snapshot")).toBeUndefined();
    expect(t.match("/partner/v1/users//snapshot")).toBeUndefined();
  });

  it("decodes percent-escapes in variables and keeps malformed ones as sent", () => {
    const t = compileTemplate("/v1/things/{id}");
    expect(t.match("/v1/things/a%20b")).toEqual({ id: "a b" });
    expect(t.match("/v1/things/%E0%A4%A")).toEqual({ id: "%E0%A4%A" });
  });

  it("supports sub-templates, ** and a trailing verb", () => {
    expect(compileTemplate("/v1/{name=shelves/*/books/*}").match("/v1/shelves/1/books/2")).toEqual({
      name: "shelves/1/books/2",
    });
    expect(compileTemplate("/v1/files/{path=**}").match("/v1/files/a/b/c")).toEqual({ path: "a/b/c" });
    const verb = compileTemplate("/partner/v1/consents/{id}:revoke");
    expect(verb.match("/partner/v1/consents/cns_1:revoke")).toEqual({ id: "cns_1" });
    expect(verb.match("/partner/v1/consents/cns_1")).toBeUndefined();
  });

  it("ranks literal-heavy templates as more specific", () => {
    expect(compileTemplate("/v1/users/me").specificity).toBeGreaterThan(
      compileTemplate("/v1/users/{id}").specificity,
    );
  });
});
