// `npm run bench`: runs every benchmark in turn; each prints JSON lines with its figures and bars.
import { spawnSync } from "node:child_process";
import path from "node:path";

const benches = ["keys", "webhooks", "snapshot", "disbursements"];
let failed = false;
for (const name of benches) {
  const r = spawnSync(process.execPath, [path.join(import.meta.dirname, `${name}.ts`)], { stdio: "inherit" });
  failed ||= r.status !== 0;
}
process.exit(failed ? 1 : 0);
