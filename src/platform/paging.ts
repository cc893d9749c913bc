import { ApiError } from "./errors.ts";

/** Items per page of a list (CONTRACT.md §1): 1 to 100, checked at the edge; 20 when unset (0). */
export const pageSize = (limit: number): number => limit || 20;

/**
 * One page of a list walked newest first by id (CONTRACT.md §1): at most `limit` rows and whether older ones
 * remain, from `rows` fetched with `limit + 1`.
 */
export function pageOf<T>(rows: T[], limit: number): { items: T[]; hasMore: boolean } {
  return { items: rows.slice(0, limit), hasMore: rows.length > limit };
}

/**
 * The answer to a `starting_after` that names nothing of the caller's (another partner's or environment's
 * id, or one that never was): the same words whoever's it is, so ids do not leak.
 */
export function unknownCursor(what: string): ApiError {
  return new ApiError(
    "invalid_argument",
    `starting_after is not one of your ${what}: pass the last id of the previous page.`,
  );
}
