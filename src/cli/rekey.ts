// `npm run db:rekey`: seals every stored secret that is under another master key again under MASTER_KEY,
// the step of a master key rotation between "every instance has the new key" and "the old key is removed"
// (docs/operations.md). Safe beside running instances and safe to run again; `--check` only counts.
// Exit codes: 0 all under MASTER_KEY; 1 some value is still under another key (with --check) or could not
// be opened by any key given; 2 usage or configuration error.
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config.ts";
import { schema } from "../entities.ts";
import { rekey } from "../master-key.ts";
import { createSecretBox } from "../platform/crypto/secret-box.ts";
import { createOrm, migrate } from "../platform/db/orm.ts";
import { createLogger } from "../platform/logger.ts";
import { resolveRuntime } from "../runtime.ts";

let flags: { check?: boolean; json?: boolean };
try {
  flags = parseArgs({ options: { check: { type: "boolean" }, json: { type: "boolean" } } }).values;
} catch (err) {
  process.stderr.write(`${(err as Error).message}\nUsage: npm run db:rekey -- [--check] [--json]\n`);
  process.exit(2);
}

try {
  const config = loadConfig();
  const logger = createLogger({ level: "warn", bindings: { service: "partner-api", task: "rekey" } });
  const runtime = await resolveRuntime(config, logger);
  try {
    await migrate(runtime.directUrl, schema, logger);
    const orm = await createOrm({ databaseUrl: runtime.directUrl, schema, poolSize: 2, logger });
    try {
      const box = createSecretBox(runtime.masterKey, runtime.acceptedMasterKeys);
      const reports = await rekey(orm.em.fork(), box, { dryRun: flags.check });
      const remaining = reports.reduce((n, r) => n + r.remaining, 0);
      const resealed = reports.reduce((n, r) => n + r.resealed, 0);
      if (flags.json) {
        process.stdout.write(
          `${JSON.stringify({ check: Boolean(flags.check), resealed, remaining, columns: reports })}\n`,
        );
      } else {
        for (const r of reports) {
          const what = flags.check
            ? `${r.remaining} under another key`
            : `${r.resealed} sealed again${r.remaining ? `, ${r.remaining} no key given opens` : ""}`;
          process.stdout.write(`${`${r.table}.${r.column}`.padEnd(36)} ${what}\n`);
        }
        process.stdout.write(
          remaining === 0
            ? "every stored secret is sealed under MASTER_KEY\n"
            : flags.check
              ? `${remaining} stored secrets are under another key: run npm run db:rekey\n`
              : `${remaining} stored secrets are under a key that is neither MASTER_KEY nor in MASTER_KEYS_ACCEPTED\n`,
        );
      }
      process.exitCode = remaining === 0 ? 0 : 1;
    } finally {
      await orm.close();
    }
  } finally {
    await runtime.embedded?.stop();
  }
} catch (err) {
  process.stderr.write(
    `${err instanceof ConfigError ? "configuration error" : "rekey failed"}: ${(err as Error).message}\n`,
  );
  process.exitCode = err instanceof ConfigError ? 2 : 1;
}
