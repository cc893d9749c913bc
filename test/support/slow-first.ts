import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The files that take longest, longest first (seconds on a 2-core machine, three or four at a time). Vitest
 * starts first what took longest in its last run; a fresh clone (CI) has no last run, and vitest then starts
 * the largest files first, which left the slowest small ones (a service process, the first hour) to start last
 * and finish a minute after everything else. Listed here, they start first; the rest follow vitest's order.
 */
export const slowestFiles = [
  "test/e2e/portal-browser.test.ts", // 80–115: Chromium through every portal page
  "test/e2e/service-process.test.ts", // 66–78: one service process after another, each on its own PostgreSQL
  "test/e2e/first-hour.test.ts", // 43–55: a fresh copy of the repository, npm install's links, npm start
  "test/e2e/master-key-rotation.test.ts", // 37–61: service processes and db:rekey runs
  "test/hostile/webhook-fairness.test.ts", // 40–60: endpoints that answer after 25 s, a circuit's probes
  "test/e2e/refund-crash.test.ts", // 38–47: a worker process killed at each step, restarted
  "test/e2e/payout-crash.test.ts", // 38–47: likewise
  "test/e2e/consent-browser.test.ts", // 38–44: Chromium
  "test/e2e/clean-stop.test.ts", // 36–43: npm start stopped four ways
  "test/e2e/cli-discovery.test.ts", // 30–40: a service process and command-line runs
  "test/hostile/portal-lockout.test.ts", // 25–35: sign-in lockouts
  "test/e2e/dedicated-capacity-cli.test.ts", // 31: a command-line process per step
  "test/e2e/webhooks-crash.test.ts", // 25–30: worker processes killed mid-delivery
  "test/hostile/portal.test.ts", // 20–30: password hashes at the real cost
  "test/hostile/hostile.test.ts", // 20–30
  "test/faults/last-resort.test.ts", // 20–30: three service processes
  "test/e2e/sdk-package.test.ts", // 20: npm pack, a partner's project type-checked
  "test/faults/retention.test.ts",
  "test/hostile/connection-caps.test.ts",
  "test/hostile/idle-connections.test.ts",
  "test/faults/silent-change-feed.test.ts",
  "test/faults/silent-database.test.ts",
];

/** Vitest's order, with {@link slowestFiles} moved to the front of their group. */
export class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const relative = path.relative(spec.project.config.root, spec.moduleId).split(path.sep).join("/");
      const at = slowestFiles.indexOf(relative);
      return at < 0 ? slowestFiles.length : at;
    };
    // Stable: groups and projects keep the order vitest gave them, and so do files of equal rank.
    return sorted.sort(
      (a, b) =>
        a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder ||
        (a.project.name === b.project.name ? 0 : a.project.name < b.project.name ? -1 : 1) ||
        rank(a) - rank(b),
    );
  }
}
