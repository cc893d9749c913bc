import { afterEach } from "vitest";
import {
  NETWORK_WHILE_HOLDING,
  type NetworkWhileHolding,
  onNetworkWhileHolding,
} from "../../src/platform/network-guard.ts";
import { serviceProcesses } from "./process.ts";

/**
 * Every test file runs under this tripwire (vitest `setupFiles`): a test in which an outbound call (DNS, HTTP,
 * `fetch`) starts while a database transaction is open fails, whether the service runs in the test's own
 * process (the guard's listener) or as a child process (its `error` log line). See platform/network-guard.ts.
 */
const seen: NetworkWhileHolding[] = [];
onNetworkWhileHolding((v) => seen.push(v));
const reported = new WeakMap<object, number>();

afterEach(() => {
  const found = seen.splice(0).map((v) => `${v.kind} ${v.target} (holding a ${v.holding})\n${v.stack}`);
  for (const service of serviceProcesses) {
    const from = reported.get(service) ?? 0;
    reported.set(service, service.logs.length);
    for (const entry of service.logs.slice(from)) {
      if (entry.msg === NETWORK_WHILE_HOLDING) found.push(`child process: ${JSON.stringify(entry)}`);
    }
  }
  if (found.length > 0) {
    throw new Error(
      `${found.length} network call(s) started inside a database transaction (a pooled connection held ` +
        `while waiting on the network):\n${found.join("\n\n")}`,
    );
  }
});
