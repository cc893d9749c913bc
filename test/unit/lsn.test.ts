import { describe, expect, it } from "vitest";
import { formatLsn, type Lsn, PrimaryPosition, parseLsn } from "../../src/platform/db/lsn.ts";
import type { Em } from "../../src/platform/db/orm.ts";

/** A primary whose answers the test hands out one at a time, in the order they were asked. */
function heldPrimary() {
  const asked: ((lsn: Lsn) => void)[] = [];
  const position = new PrimaryPosition(
    () =>
      new Promise<Lsn>((resolve) => {
        asked.push(resolve);
      }),
  );
  return { position, asked, em: {} as Em };
}

describe("WAL positions", () => {
  it("read and write PostgreSQL's text form, ordered as the log is", () => {
    expect(parseLsn("0/0")).toBe(0n);
    expect(parseLsn("16/B374D848")).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn("0/FFFFFFFF") < parseLsn("1/0")).toBe(true);
    expect(formatLsn(parseLsn("16/B374D848"))).toBe("16/B374D848");
    expect(formatLsn(parseLsn("a/1"))).toBe("A/1");
    expect(() => parseLsn("16-B374D848")).toThrow(/not a WAL position/);
  });

  it("give each read an answer asked after it began, one question in flight for any number of reads", async () => {
    const { position, asked, em } = heldPrimary();
    const first = position.after(em);
    expect(asked).toHaveLength(1);
    // Arrive while the first question is on its way: its answer may predate them, so they wait for the next.
    const second = position.after(em);
    const third = position.after(em);
    expect(asked).toHaveLength(1);
    asked[0]?.(10n);
    expect(await first).toBe(10n);
    await Promise.resolve();
    await Promise.resolve();
    expect(asked).toHaveLength(2);
    // Arrives while the second question is on its way: not answered by it.
    const fourth = position.after(em);
    asked[1]?.(20n);
    expect(await second).toBe(20n);
    expect(await third).toBe(20n);
    await new Promise((r) => setImmediate(r));
    expect(asked).toHaveLength(3);
    asked[2]?.(30n);
    expect(await fourth).toBe(30n);
    // Nothing in flight: a new read asks at once.
    const fifth = position.after(em);
    expect(asked).toHaveLength(4);
    asked[3]?.(40n);
    expect(await fifth).toBe(40n);
  });

  it("ask again after a failed question", async () => {
    let calls = 0;
    const position = new PrimaryPosition(async () => {
      calls++;
      if (calls === 1) throw new Error("primary down");
      return 7n;
    });
    await expect(position.after({} as Em)).rejects.toThrow(/primary down/);
    expect(await position.after({} as Em)).toBe(7n);
  });
});
