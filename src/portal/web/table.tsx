import type { ComponentChildren } from "preact";
import { TableWrap } from "./ui.tsx";

/** A column of a list: its heading and what each row shows in it. */
export interface Column<T> {
  head: string;
  cell: (row: T) => ComponentChildren;
}

/**
 * A list as a dense table (a row per line, scrolling sideways in its own box on a narrow screen), or, when it
 * has no rows, what to do next.
 */
export function ListTable<T>(props: {
  label: string;
  columns: Column<T>[];
  rows: T[] | undefined;
  rowKey: (row: T) => string;
  empty: ComponentChildren;
}) {
  const { label, columns, rows, rowKey, empty } = props;
  if (!rows) return null;
  if (rows.length === 0) return <p class="empty">{empty}</p>;
  return (
    <TableWrap label={label}>
      <table class="dense">
        <caption class="visually-hidden">{label}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c.head}>
                {c.head}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((c) => (
                <td key={c.head}>{c.cell(row)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}
