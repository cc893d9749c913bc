import { describe, expect, it } from "vitest";
import { createSender } from "../../src/webhooks/sender.ts";

describe("a webhook destination whose DNS never answers", () => {
  it("ends the attempt within the connect time-out, as dns_error, without saying what it resolved to", async () => {
    let asked = 0;
    const sender = createSender({
      policy: {
        allowLocal: false,
        resolver: () => {
          asked++;
          return new Promise(() => {}); // a resolver that never answers
        },
      },
      connectTimeoutMs: 300,
      timeoutMs: 30_000,
    });
    try {
      const started = performance.now();
      const result = await sender.post("https://tarpit.example/hooks", "{}", {});
      const took = performance.now() - started;
      expect(asked).toBe(1);
      expect(result).toMatchObject({ ok: false, error: "dns_error", statusCode: undefined });
      expect(took).toBeGreaterThanOrEqual(250);
      expect(took).toBeLessThan(5_000);
    } finally {
      sender.close();
    }
  });
});
