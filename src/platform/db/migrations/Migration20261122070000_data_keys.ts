import { Migration } from "@mikro-orm/migrations";

/**
 * Keys for keyed hashes (phone numbers, counterparties) and consent-page CSRF tokens, sealed under the
 * master key. They were derived from the master key; kept here, they outlive its rotation, so the hashes
 * already stored keep matching (a counterparty id is never stored in the clear, so its hash could not be
 * recomputed under a new key).
 */
export class Migration20261122070000_data_keys extends Migration {
  override name = "Migration20261122070000_data_keys";

  up(): void {
    this.addSql(`
      create table data_keys (
        label text primary key,
        key_enc bytea not null,
        created_at timestamptz not null
      )`);
  }
}
