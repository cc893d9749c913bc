import { describe, expect, it } from "vitest";
import { FairQueue } from "../../src/webhooks/fair-queue.ts";
import { createWakeTimer } from "../../src/webhooks/wake-timer.ts";

const item = (partnerId: string, destinationId: string, n: number) => ({ partnerId, destinationId, n });
type Item = ReturnType<typeof item>;

/** Takes what may start now. */
const drain = (q: FairQueue<Item>, blocked?: (id: string) => boolean) => {
  const out: Item[] = [];
  for (let x = q.next(blocked); x; x = q.next(blocked)) out.push(x);
  return out;
};

describe("the fair queue of webhook attempts", () => {
  it("serves partners in turn, and each partner's destinations in turn", () => {
    const q = new FairQueue<Item>({ total: 100, perPartner: 100, perDestination: 100 });
    for (let n = 0; n < 4; n++) q.push(item("a", "a1", n));
    for (let n = 0; n < 2; n++) q.push(item("a", "a2", n));
    q.push(item("b", "b1", 0));
    q.push(item("b", "b1", 1));
    expect(drain(q).map((x) => `${x.destinationId}:${x.n}`)).toEqual([
      "a1:0",
      "b1:0",
      "a2:0",
      "b1:1",
      "a1:1",
      "a2:1",
      "a1:2",
      "a1:3",
    ]);
    expect(q.inFlight).toBe(8);
    expect(q.waiting).toBe(0);
  });

  it("keeps every limit, and a full destination or partner takes nothing from the others", () => {
    const q = new FairQueue<Item>({ total: 5, perPartner: 3, perDestination: 2 });
    for (let n = 0; n < 50; n++) q.push(item("slow", "s1", n));
    for (let n = 0; n < 50; n++) q.push(item("slow", "s2", n));
    const first = drain(q);
    expect(first.filter((x) => x.destinationId === "s1").length).toBeLessThanOrEqual(2);
    expect(first.length).toBe(3);
    // Another partner still gets the rest of the total.
    q.push(item("other", "o1", 0));
    q.push(item("other", "o1", 1));
    q.push(item("other", "o1", 2));
    const o = drain(q);
    expect(o.map((x) => x.partnerId)).toEqual(["other", "other"]);
    expect(q.hasRoom).toBe(false);
    // A slot that frees goes to whoever is next in turn and may take it: the slow partner (it has not had a
    // turn since), then the slow partner again, since the other's destination is at its own limit.
    q.finish(first[0] as Item);
    expect(q.next()?.partnerId).toBe("slow");
    q.finish(first[1] as Item);
    expect(q.next()?.partnerId).toBe("slow");
    q.finish(o[0] as Item);
    expect(q.next()).toMatchObject({ partnerId: "other", n: 2 });
    expect(q.inFlight).toBe(5);
    expect(q.inFlightTo(item("slow", "s1", 0))).toBeLessThanOrEqual(2);
  });

  it("passes over a blocked destination, and gives back what waits for one", () => {
    const q = new FairQueue<Item>({ total: 10, perPartner: 10, perDestination: 10 });
    q.push(item("a", "probing", 0));
    q.push(item("a", "probing", 1));
    q.push(item("a", "fine", 0));
    expect(drain(q, (id) => id === "probing").map((x) => x.destinationId)).toEqual(["fine"]);
    expect(q.waitingFor(item("a", "probing", 0))).toBe(2);
    expect(q.removeDestination(item("a", "probing", 0)).map((x) => x.n)).toEqual([0, 1]);
    expect(q.waiting).toBe(0);
    q.push(item("a", "x", 7));
    expect(q.remove((x) => x.n === 7)).toHaveLength(1);
    expect(q.next()).toBeUndefined();
  });
});

describe("the wake timer", () => {
  it("wakes each value at its time, earliest first, within its capacity and horizon", async () => {
    const woken: string[] = [];
    const timer = createWakeTimer<string>({
      capacity: 3,
      horizonMs: 1_000,
      wake: (due) => woken.push(...due),
    });
    timer.add("late", 60);
    timer.add("soon", 10);
    timer.add("too far", 5_000);
    timer.add("now", 0);
    timer.add("over capacity", 20);
    expect(timer.size).toBe(3);
    await new Promise((r) => setTimeout(r, 120));
    expect(woken).toEqual(["now", "soon", "late"]);
    expect(timer.size).toBe(0);
    timer.add("cleared", 10);
    timer.clear();
    await new Promise((r) => setTimeout(r, 30));
    expect(woken).toHaveLength(3);
  });
});
