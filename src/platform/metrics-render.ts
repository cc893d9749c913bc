import type { Registry } from "prom-client";

/**
 * How long one scrape may take, all families together: under Prometheus's default `scrape_timeout` (10 s), so a
 * slow database leaves families out of a scrape that arrives, rather than a scrape that never does.
 */
export const SCRAPE_BUDGET_MS = 5_000;

/** The gauge {@link renderer} writes itself, after every other family. */
const UNAVAILABLE = "metrics_families_unavailable";

/**
 * The exposition text (format 0.0.4), a family at a time rather than all at once as prom-client's own
 * `registry.metrics()` does: the gauges that read the database then hold one pooled connection at a time, not
 * one each, and a family that cannot be read (its query failed, ran into its time-outs, or the scrape's budget
 * was spent) fails only itself: it is left out, with a comment saying so, and counted. Scrapes that arrive while
 * one is being read share its text: however many scrapers (or retries of an abandoned scrape) there are, one
 * reading at a time touches the database.
 */
export function renderer(registry: Registry, budgetMs = SCRAPE_BUDGET_MS): () => Promise<string> {
  let reading: Promise<string> | undefined;
  return () => {
    reading ??= render(registry, budgetMs).finally(() => {
      reading = undefined;
    });
    return reading;
  };
}

async function render(registry: Registry, budgetMs: number): Promise<string> {
  const until = performance.now() + budgetMs;
  const parts: string[] = [];
  let unavailable = 0;
  for (const { name } of registry.getMetricsAsArray()) {
    try {
      const left = until - performance.now();
      // Once the budget is spent, the families left are not read at all (no query is started for them).
      if (left <= 0) throw new Error("the scrape's time was spent");
      parts.push(await within(registry.getSingleMetricAsString(name), left));
    } catch (err) {
      unavailable++;
      parts.push(`# ${name} unavailable: ${String((err as Error)?.message ?? err).split("\n")[0]}`);
    }
  }
  // An alert on a family left out sees no data, and says nothing: this one says families were left out.
  parts.push(
    `# HELP ${UNAVAILABLE} Families this scrape left out because they could not be read (their alerts see no data).`,
    `# TYPE ${UNAVAILABLE} gauge`,
    `${UNAVAILABLE} ${unavailable}`,
  );
  return `${parts.join("\n")}\n`;
}

/**
 * `read`, or a rejection once `ms` have passed: the scrape goes on without it (the read itself ends by its own
 * time-outs; its late failure is not reported again).
 */
function within<T>(read: Promise<T>, ms: number): Promise<T> {
  read.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    read,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("not read within the scrape's time")), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
