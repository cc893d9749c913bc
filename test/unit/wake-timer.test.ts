import { describe, expect, it } from "vitest";
import { createWakeTimer } from "../../src/webhooks/wake-timer.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the in-process wake timer of scheduled webhook attempts", () => {
  it("wakes each value at its time, earliest first, whatever order they were added in", async () => {
    const woken: { value: string; at: number }[] = [];
    const started = Date.now();
    const timer = createWakeTimer<string>({
      capacity: 10,
      horizonMs: 60_000,
      wake: (due) => {
        for (const value of due) woken.push({ value, at: Date.now() - started });
      },
    });
    timer.add("c", 120);
    timer.add("a", 20);
    timer.add("b", 70);
    timer.add("now", -5);
    expect(timer.size).toBe(4);
    await sleep(200);
    expect(woken.map((w) => w.value)).toEqual(["now", "a", "b", "c"]);
    for (const [value, due] of [
      ["a", 20],
      ["b", 70],
      ["c", 120],
    ] as const) {
      const at = woken.find((w) => w.value === value)?.at ?? 0;
      expect(at, value).toBeGreaterThanOrEqual(due - 2);
      expect(at, value).toBeLessThan(due + 50);
    }
    expect(timer.size).toBe(0);
  });

  it("keeps at most its capacity, nothing past its horizon, and nothing once cleared", async () => {
    const woken: number[] = [];
    const timer = createWakeTimer<number>({
      capacity: 2,
      horizonMs: 1_000,
      wake: (due) => woken.push(...due),
    });
    timer.add(1, 10);
    timer.add(2, 10);
    timer.add(3, 10); // over capacity: its queued job brings it instead
    timer.add(4, 5_000); // past the horizon
    expect(timer.size).toBe(2);
    await sleep(60);
    expect(woken.sort()).toEqual([1, 2]);
    timer.add(5, 20);
    timer.clear();
    await sleep(60);
    expect(woken).toEqual([1, 2]);
    expect(timer.size).toBe(0);
  });
});
