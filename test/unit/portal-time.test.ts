import { describe, expect, it } from "vitest";
import { DEFAULT_TIME_ZONE, relativeTime, timeZone, zonedTime } from "../../src/portal/web/time.tsx";

// Times in the portal: the partner's zone (Lagos unless chosen), day first and 24 hours, and how long ago.
describe("times in the portal", () => {
  const at = new Date("2026-11-27T21:08:52Z");
  it("shows a time in Lagos by default, and in the zone chosen", () => {
    expect(timeZone()).toBe(DEFAULT_TIME_ZONE);
    expect(zonedTime(at)).toBe("27 Nov 2026, 22:08:52");
    expect(zonedTime(at, "UTC")).toBe("27 Nov 2026, 21:08:52");
  });
  it("says how long ago, or how soon, in the largest whole unit", () => {
    const now = at.getTime();
    expect(relativeTime(new Date(now - 10_000), now)).toBe("just now");
    expect(relativeTime(new Date(now - 3 * 60_000), now)).toBe("3 minutes ago");
    expect(relativeTime(new Date(now - 2 * 3_600_000 - 60_000), now)).toBe("2 hours ago");
    expect(relativeTime(new Date(now - 86_400_000), now)).toBe("yesterday");
    expect(relativeTime(new Date(now + 5 * 60_000), now)).toBe("in 5 minutes");
  });
});
