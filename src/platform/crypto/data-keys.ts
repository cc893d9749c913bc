import type { Em } from "../db/orm.ts";
import { sql } from "../db/sql.ts";
import { deriveKey } from "./keys.ts";
import type { SecretBox } from "./secret-box.ts";

/** The purposes that have a key of their own. */
export const dataKeyLabels = ["phone-hash", "counterparty-hash", "consent-csrf", "person-code"] as const;
export type DataKeyLabel = (typeof dataKeyLabels)[number];
export type DataKeys = Record<DataKeyLabel, Buffer>;

/** Binds a sealed data key to its label. */
export const dataKeyAad = (label: string) => `data-key:${label}`;

/** The master key in use cannot open what this database holds: the service must not start. */
export class MasterKeyMismatchError extends Error {}

const MISMATCH =
  "MASTER_KEY (with MASTER_KEYS_ACCEPTED) cannot open what this database holds: it is not the master key the database was sealed with";

/**
 * Loads the keys for keyed hashes and CSRF tokens, creating any that is missing (derived from the master
 * key, as they always were, so hashes stored before keep matching). Instances starting together create the
 * same rows; the first insert wins and every instance uses what was stored.
 *
 * Also the start-up check that MASTER_KEY is the right one: a key that cannot open them stops the start
 * with {@link MasterKeyMismatchError}, before anything is sealed under a key the others cannot open. Where
 * there are none yet (a database from before they were kept), the value `probe` finds (something else that
 * is sealed) must open first, so a wrong key never gets to create them.
 */
export async function loadDataKeys(
  em: Em,
  box: SecretBox,
  masterKey: Buffer,
  now: Date,
  probe: () => Promise<{ sealed: Buffer; aad: string } | undefined> = async () => undefined,
): Promise<DataKeys> {
  const [present] = await sql<{ n: number }>(em, "select count(*)::int as n from data_keys");
  const sample = present?.n === 0 ? await probe() : undefined;
  if (sample) {
    try {
      box.open(sample.sealed, sample.aad);
    } catch (err) {
      throw new MasterKeyMismatchError(`${MISMATCH} (${(err as Error).message})`);
    }
  }
  await sql(
    em,
    `insert into data_keys (label, key_enc, created_at)
     select * from unnest($1::text[], $2::bytea[], $3::timestamptz[]) on conflict (label) do nothing`,
    [
      [...dataKeyLabels],
      dataKeyLabels.map((l) => box.seal(deriveKey(masterKey, l), dataKeyAad(l))),
      dataKeyLabels.map(() => now),
    ],
  );
  const rows = await sql<{ label: string; key_enc: Buffer }>(
    em,
    "select label, key_enc from data_keys where label = any($1::text[])",
    [[...dataKeyLabels]],
  );
  const keys = {} as DataKeys;
  for (const row of rows) {
    try {
      keys[row.label as DataKeyLabel] = box.open(row.key_enc, dataKeyAad(row.label));
    } catch {
      throw new MasterKeyMismatchError(MISMATCH);
    }
  }
  return keys;
}
