import { describe, expect, it } from "vitest";
import {
  addDays,
  isCalendarDate,
  lagosDay,
  lagosDayStart,
  nextLagosMidnight,
} from "../../src/platform/dates.ts";

describe("calendar dates", () => {
  it("are real days only", () => {
    for (const day of ["2027-02-28", "2028-02-29", "2026-12-31", "0001-01-01"])
      expect(isCalendarDate(day)).toBe(true);
    for (const day of [
      "2027-02-29",
      "2027-02-30",
      "2026-13-01",
      "2026-00-10",
      "2026-1-1",
      "2026-01-01T00:00:00Z",
      "",
    ])
      expect(isCalendarDate(day), day).toBe(false);
  });

  it("turn over at midnight in Lagos (UTC+1), not at midnight UTC", () => {
    expect(lagosDay(new Date("2026-11-23T22:59:59Z"))).toBe("2026-11-23");
    expect(lagosDay(new Date("2026-11-23T23:00:00Z"))).toBe("2026-11-24");
  });

  it("begin and end at midnight in Lagos: 23:00 UTC", () => {
    const late = new Date("2026-11-23T22:59:59Z"); // 23:59:59 in Lagos
    expect(lagosDayStart(late).toISOString()).toBe("2026-11-22T23:00:00.000Z");
    expect(nextLagosMidnight(late).toISOString()).toBe("2026-11-23T23:00:00.000Z");
    const midnight = new Date("2026-11-23T23:00:00Z"); // a new day in Lagos
    expect(lagosDayStart(midnight).toISOString()).toBe("2026-11-23T23:00:00.000Z");
    expect(nextLagosMidnight(midnight).toISOString()).toBe("2026-11-24T23:00:00.000Z");
    expect(nextLagosMidnight(new Date("2026-12-31T23:30:00Z")).toISOString()).toBe(
      "2027-01-01T23:00:00.000Z",
    );
  });

  it("add across months and leap days", () => {
    expect(addDays("2028-02-28", 1)).toBe("2028-02-29");
    expect(addDays("2026-11-23", 365)).toBe("2027-11-23");
  });
});
