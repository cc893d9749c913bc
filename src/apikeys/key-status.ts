import type { ApiKeyRow } from "./api-key.entity.ts";

/** A key's lifecycle state at a given time. */
export type ApiKeyStatus = "ACTIVE" | "EXPIRING" | "EXPIRED" | "REVOKED";

/** The state of `row` at `now`. */
export function apiKeyStatus(row: Pick<ApiKeyRow, "revokedAt" | "expiresAt">, now: Date): ApiKeyStatus {
  if (row.revokedAt) return "REVOKED";
  if (row.expiresAt) return row.expiresAt <= now ? "EXPIRED" : "EXPIRING";
  return "ACTIVE";
}
