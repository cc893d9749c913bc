import type { Em } from "./orm.ts";
import { sql } from "./sql.ts";

/**
 * Runs one `delete … returning …` statement and answers how many rows it deleted. The count is taken in the
 * database, so the deleted rows themselves never travel back.
 */
export async function deleteCounted(em: Em, statement: string, params: readonly unknown[]): Promise<number> {
  const [row] = await sql<{ n: number }>(
    em,
    `with gone as (${statement}) select count(*)::int as n from gone`,
    params,
  );
  return row?.n ?? 0;
}

/**
 * Runs a delete that removes at most `batch` rows (its own `limit`, given among `params`) again and again until
 * one removes fewer: a large backlog goes in short statements, none holding its locks for long. Outside a
 * transaction each statement commits on its own. Returns how many rows went in all.
 */
export async function deleteInBatches(
  em: Em,
  statement: string,
  params: readonly unknown[],
  batch: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await deleteCounted(em, statement, params);
    total += deleted;
    if (deleted < batch) return total;
  }
}
