import type { TestApp } from "./app.ts";

/** The app's `/metrics` text, scraped with its internal token. */
export async function scrapeMetrics(t: TestApp): Promise<string> {
  const res = await fetch(`${t.internalUrl}/metrics`, {
    headers: { authorization: `Bearer ${t.internalToken}` },
  });
  return res.text();
}

/** The value of the first sample of `name` carrying every one of `labels`, 0 when absent. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const line = text
    .split("\n")
    .find(
      (l) =>
        (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) &&
        Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)),
    );
  return line ? Number(line.split(" ").pop()) : 0;
}
