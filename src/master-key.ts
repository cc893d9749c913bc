import { evidenceAad } from "./consent/consent.service.ts";
import { linkTokenAad } from "./consent/consent-link.service.ts";
import { mandateEvidenceAad, mandateTokenAad } from "./disbursements/mandate.service.ts";
import { idempotencyAad } from "./idempotency/idempotency.service.ts";
import { dataKeyAad } from "./platform/crypto/data-keys.ts";
import type { SecretBox } from "./platform/crypto/secret-box.ts";
import type { Em } from "./platform/db/orm.ts";
import { sql } from "./platform/db/sql.ts";
import { auditEvidenceAad } from "./portal/audit.service.ts";
import { inviteAad, memberTotpAad } from "./portal/people.service.ts";
import { signingKeyAad } from "./signing/signing-key.service.ts";
import { instrumentsAad } from "./users/payment-instruments.ts";
import { phoneAad } from "./users/user.service.ts";
import { secretAad } from "./webhooks/delivery.worker.ts";

/** A column holding values sealed under the master key, and the associated data each row's value is bound to. */
export interface SealedColumn {
  table: string;
  column: string;
  /** The primary key's columns, in order. */
  key: string[];
  aad(row: Record<string, string>): string;
}

/** Every sealed column of the schema. A new one must be listed here, or rotation would leave it behind. */
export const sealedColumns: readonly SealedColumn[] = [
  { table: "data_keys", column: "key_enc", key: ["label"], aad: (r) => dataKeyAad(r.label ?? "") },
  {
    table: "signing_keys",
    column: "private_key_enc",
    key: ["kid"],
    aad: (r) => signingKeyAad(r.kid ?? ""),
  },
  { table: "webhooks", column: "secret_enc", key: ["id"], aad: (r) => secretAad(r.id ?? "") },
  { table: "webhooks", column: "previous_secret_enc", key: ["id"], aad: (r) => secretAad(r.id ?? "") },
  { table: "users", column: "phone_enc", key: ["id"], aad: (r) => phoneAad(r.id ?? "") },
  { table: "consent_links", column: "token_enc", key: ["id"], aad: (r) => linkTokenAad(r.id ?? "") },
  { table: "consents", column: "evidence_enc", key: ["id"], aad: (r) => evidenceAad(r.id ?? "") },
  {
    table: "disbursements",
    column: "acceptance_token_enc",
    key: ["id"],
    aad: (r) => mandateTokenAad(r.id ?? ""),
  },
  {
    table: "disbursements",
    column: "acceptance_evidence_enc",
    key: ["id"],
    aad: (r) => mandateEvidenceAad(r.id ?? ""),
  },
  {
    table: "payment_instruments",
    column: "sealed",
    key: ["user_id"],
    aad: (r) => instrumentsAad(r.user_id ?? ""),
  },
  {
    table: "idempotency_keys",
    column: "response",
    key: ["partner_id", "environment", "key"],
    aad: (r) => idempotencyAad(r.partner_id ?? "", r.environment ?? "", r.key ?? ""),
  },
  { table: "portal_members", column: "totp_enc", key: ["id"], aad: (r) => memberTotpAad(r.id ?? "") },
  { table: "portal_invites", column: "totp_enc", key: ["id"], aad: (r) => inviteAad(r.id ?? "") },
  {
    table: "portal_audit_events",
    column: "evidence_enc",
    key: ["id"],
    aad: (r) => auditEvidenceAad(r.id ?? ""),
  },
];

/** Per column: how many values are sealed under another key than the current one. */
export interface RekeyReport {
  table: string;
  column: string;
  /** Sealed again under the current key by this run. */
  resealed: number;
  /**
   * Still under another key afterwards: with `dryRun`, every such value; otherwise those no key given could
   * open (their master key is neither MASTER_KEY nor among MASTER_KEYS_ACCEPTED).
   */
  remaining: number;
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Seals every stored value that is under another master key again under the current one (or, with
 * `dryRun`, only counts them). Runs beside live instances: each value is replaced only if it is still the
 * one read (a row changed meanwhile was sealed by an instance, under the current key), in small batches,
 * so it can be stopped and run again at any time.
 */
export async function rekey(
  em: Em,
  box: SecretBox,
  options: { dryRun?: boolean; batchSize?: number } = {},
): Promise<RekeyReport[]> {
  const batchSize = options.batchSize ?? 500;
  const prefix = box.currentPrefix;
  const reports: RekeyReport[] = [];
  for (const c of sealedColumns) {
    const report = { table: c.table, column: c.column, resealed: 0, remaining: 0 };
    reports.push(report);
    const keys = c.key.map(quote).join(", ");
    const col = quote(c.column);
    const outdated = `${col} is not null and substring(${col} from 1 for ${prefix.length}) <> $1`;
    if (options.dryRun) {
      const [row] = await sql<{ n: number }>(
        em,
        `select count(*)::int as n from ${quote(c.table)} where ${outdated}`,
        [prefix],
      );
      report.remaining = row?.n ?? 0;
      continue;
    }
    // Keyset pagination over the primary key, so a value that cannot be opened is passed, not read forever.
    let after: string[] | undefined;
    for (;;) {
      const rows = await sql<Record<string, string | Buffer>>(
        em,
        `select ${keys}, ${col} as sealed from ${quote(c.table)}
          where ${outdated} ${after ? `and (${keys}) > (${c.key.map((_, i) => `$${i + 2}`).join(", ")})` : ""}
          order by ${keys} limit ${batchSize}`,
        [prefix, ...(after ?? [])],
      );
      if (rows.length === 0) break;
      const ids: string[][] = c.key.map(() => []);
      const olds: Buffer[] = [];
      const news: Buffer[] = [];
      for (const row of rows) {
        const names = Object.fromEntries(c.key.map((k) => [k, String(row[k])]));
        let plain: Buffer;
        try {
          plain = box.open(row.sealed as Buffer, c.aad(names));
        } catch {
          report.remaining++;
          continue;
        }
        for (const [i, k] of c.key.entries()) ids[i]?.push(names[k] as string);
        olds.push(row.sealed as Buffer);
        news.push(box.seal(plain, c.aad(names)));
      }
      if (olds.length > 0) {
        const updated = await sql(
          em,
          `update ${quote(c.table)} t set ${col} = u.sealed
             from unnest(${c.key.map((_, i) => `$${i + 1}::text[]`).join(", ")}, $${c.key.length + 1}::bytea[],
                         $${c.key.length + 2}::bytea[]) as u (${keys}, old, sealed)
            where ${c.key.map((k) => `t.${quote(k)} = u.${quote(k)}`).join(" and ")} and t.${col} = u.old
           returning 1`,
          [...ids, olds, news],
        );
        report.resealed += updated.length;
      }
      const last = rows[rows.length - 1] as Record<string, string>;
      after = c.key.map((k) => String(last[k]));
    }
  }
  return reports;
}
