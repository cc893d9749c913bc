/**
 * Waits until `check` holds, re-checking as soon as the event loop is free; fails after `timeoutMs`. For
 * things that happen on another connection or process (a NOTIFY, a worker's write), never a fixed sleep.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 10_000, what = "condition" }: { timeoutMs?: number; what?: string } = {},
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
