import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/platform/metrics.ts";

/** The sample lines of one family (its name, then `{` or a space). */
const samples = (text: string, name: string) =>
  text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));

describe("metrics", () => {
  it("bound the request labels to fixed sets, and count each series once per request", async () => {
    const m = createMetrics();
    m.http.record("partner", "rest", "/partner/v1/keys", "GET", 200, 0.004);
    m.http.record("partner", "rest", "/partner/v1/keys", "GET", 200, 0.2);
    m.http.record("partner", "rest", "/partner/v1/keys", "BREW", 405, 0.001);
    m.http.record("partner", "rest", "/partner/v1/keys", "other", 405, 0.001);
    m.http.record("partner", "http", "unmatched", "GET", 0, 40);
    const text = await m.render();
    expect(samples(text, "http_requests_total").sort()).toEqual(
      [
        'http_requests_total{listener="partner",face="http",route="unmatched",method="GET",status="other"} 1',
        'http_requests_total{listener="partner",face="rest",route="/partner/v1/keys",method="GET",status="200"} 2',
        'http_requests_total{listener="partner",face="rest",route="/partner/v1/keys",method="other",status="405"} 2',
      ].sort(),
    );
    const keys = 'listener="partner",face="rest",route="/partner/v1/keys"';
    expect(samples(text, "http_request_duration_seconds_count")).toContain(
      `http_request_duration_seconds_count{${keys}} 4`,
    );
    expect(text).toContain(`http_request_duration_seconds_bucket{le="0.005",${keys}} 3`);
    expect(text).toContain(`http_request_duration_seconds_bucket{le="0.25",${keys}} 4`);
    expect(text).toContain('http_request_duration_seconds_bucket{le="30",listener="partner",face="http"');
    expect(text).toMatch(
      /^http_request_duration_seconds_bucket\{le="\+Inf",listener="partner",face="http".* 1$/m,
    );
  });

  it("read a counter's value by its labels", async () => {
    const m = createMetrics();
    m.retentionPurged.inc({ table: "events" }, 0);
    m.retentionPurged.inc({ table: "webhooks" }, 3);
    m.retentionPurged.inc({ table: "webhooks" });
    expect(await m.retentionPurged.get({ table: "events" })).toBe(0);
    expect(await m.retentionPurged.get({ table: "webhooks" })).toBe(4);
    expect(await m.retentionPurged.get({ table: "never" })).toBe(0);
    expect(() => m.payouts.inc({ table: "events" } as never)).toThrow(/label/);
  });

  it("leave out a gauge that cannot be read, saying so and counting it, and serve the rest", async () => {
    const m = createMetrics();
    m.gauge("first_due", "Read first.", async () => [{ labels: { queue: "a" }, value: 2 }]);
    m.gauge("broken_due", "Its database is away.", async () => {
      throw new Error("connection refused\nat somewhere");
    });
    m.gauge("later_due", "Read after the broken one.", async () => [{ labels: {}, value: 7 }]);
    const text = await m.render();
    expect(text).toContain('first_due{queue="a"} 2');
    expect(text).toContain("# broken_due unavailable: connection refused\n");
    expect(text).not.toMatch(/^# (HELP|TYPE) broken_due/m);
    expect(text).toContain("later_due 7");
    // Counted, so an alert can say so; and back to 0 when every family is read.
    expect(text).toContain("\nmetrics_families_unavailable 1\n");
    expect(text.endsWith("\n")).toBe(true);
    const whole = createMetrics();
    whole.gauge("later_due", "Read.", async () => [{ labels: {}, value: 7 }]);
    expect(await whole.render()).toContain("\nmetrics_families_unavailable 0\n");
  });

  it("read each gauge afresh at every scrape, keeping no series whose rows are gone", async () => {
    const m = createMetrics();
    let rows = [
      { labels: { queue: "a" }, value: 1 },
      { labels: { queue: "b" }, value: 5 },
    ];
    m.gauge("queue_depth", "Jobs waiting.", async () => rows);
    expect(samples(await m.render(), "queue_depth")).toEqual([
      'queue_depth{queue="a"} 1',
      'queue_depth{queue="b"} 5',
    ]);
    rows = [{ labels: { queue: "b" }, value: 2 }];
    expect(samples(await m.render(), "queue_depth")).toEqual(['queue_depth{queue="b"} 2']);
  });

  it("keep two services' registries apart, each with its own process and Node.js metrics", async () => {
    const a = createMetrics();
    const b = createMetrics();
    a.rateLimitRejections.inc({ class: "write" });
    expect(await b.rateLimitRejections.get({ class: "write" })).toBe(0);
    for (const text of [await a.render(), await b.render()]) {
      expect(text).toMatch(/^# TYPE process_cpu_user_seconds_total counter$/m);
      expect(text).toMatch(/^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
    }
  });
});
