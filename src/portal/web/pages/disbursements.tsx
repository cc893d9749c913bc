import { useInfiniteQuery, useQuery } from "@connectrpc/connect-query";
import { useMemo, useState } from "preact/hooks";
import {
  type Disbursement,
  Disbursement_StatusSchema,
  DisbursementService,
} from "../../../../gen/partner/v1/disbursements_pb.ts";
import { TimeChart } from "../chart.tsx";
import { IdLink } from "../ids.tsx";
import { ListTable } from "../table.tsx";
import { ErrorBox, enumName, LoadMore, Page, StatusBadge, TableWrap, Time } from "../ui.tsx";

/** Kobo as naira for people to read (exact: integer arithmetic on the bigint, never floating point). */
export function naira(kobo: bigint): string {
  const sign = kobo < 0n ? "-" : "";
  const abs = kobo < 0n ? -kobo : kobo;
  const whole = (abs / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}₦${whole}.${(abs % 100n).toString().padStart(2, "0")}`;
}

/** Today in Lagos as YYYY-MM-DD (the books' days are Lagos days). */
const lagosDay = (d: Date) => new Date(d.getTime() + 60 * 60 * 1000).toISOString().slice(0, 10);

/** The latest disbursements (each a link to its page), and the books of a period. */
export function DisbursementsPage() {
  return (
    <Page title="Disbursements and books">
      <Recent />
      <Books />
    </Page>
  );
}

function Books() {
  const today = lagosDay(new Date());
  const monthAgo = lagosDay(new Date(Date.now() - 30 * 86_400_000));
  const [period, setPeriod] = useState({ from: monthAgo, to: today });
  // The totals are the whole period's on every page; the entries come a page at a time.
  const books = useInfiniteQuery(
    DisbursementService.method.getBooks,
    { ...period, limit: 50, startingAfter: "" },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.nextStartingAfter : undefined),
    },
  );
  const totals = books.data?.pages[0];
  const entries = books.data?.pages.flatMap((p) => p.entries) ?? [];
  return (
    <div class="panel">
      <h2>Books</h2>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          setPeriod({ from: String(f.get("from")), to: String(f.get("to")) });
        }}
      >
        <label>
          From (Lagos day)
          <input name="from" type="date" required defaultValue={period.from} />
        </label>
        <label>
          To
          <input name="to" type="date" required defaultValue={period.to} />
        </label>
        <button type="submit">Show</button>
      </form>
      <ErrorBox error={books.error} />
      <BooksChart from={period.from} to={period.to} />
      {totals ? (
        <dl class="facts">
          <dt>Principal out</dt>
          <dd>{naira(totals.principalOutKobo)}</dd>
          <dt>Fees</dt>
          <dd>{naira(totals.feesKobo)}</dd>
          <dt>Repayments in</dt>
          <dd>{naira(totals.repaymentsInKobo)}</dd>
          <dt>Refunds</dt>
          <dd>{naira(totals.refundsKobo)}</dd>
          <dt>Net</dt>
          <dd>{naira(totals.netKobo)}</dd>
        </dl>
      ) : null}
      {entries.length ? (
        <TableWrap label="Entries of the period, oldest first">
          <table class="dense">
            <caption>Entries of the period, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Booked</th>
                <th scope="col">Kind</th>
                <th scope="col">Amount</th>
                <th scope="col">Disbursement</th>
                <th scope="col">Repayment</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((b, n) => (
                <tr key={`${b.bookedAt}.${b.kind}.${b.disbursementId}.${b.repaymentId}.${n}`}>
                  <td>
                    <Time at={b.bookedAt} />
                  </td>
                  <td>
                    <code>{b.kind}</code>
                  </td>
                  <td>{naira(b.amountKobo)}</td>
                  <td>
                    <IdLink id={b.disbursementId} />
                  </td>
                  <td>{b.repaymentId ? <IdLink id={b.repaymentId} /> : null}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <LoadMore list={books} />
    </div>
  );
}

const STATUSES = [
  "AWAITING_ACCEPTANCE",
  "PENDING",
  "PROCESSING",
  "DELIVERED",
  "FAILED",
  "REVERSED",
  "CANCELLED",
];

const RECENT_COLUMNS = [
  { head: "Disbursement", cell: (d: Disbursement) => <IdLink id={d.id} /> },
  {
    head: "Status",
    cell: (d: Disbursement) => <StatusBadge status={enumName(Disbursement_StatusSchema, d.status)} />,
  },
  { head: "Principal", cell: (d: Disbursement) => naira(d.principalKobo) },
  { head: "User", cell: (d: Disbursement) => <IdLink id={d.userId} /> },
  { head: "Created", cell: (d: Disbursement) => <Time at={d.createdAt} relative /> },
];

function Recent() {
  const [status, setStatus] = useState("");
  // The status filter's number; the generated enum type admits only its members, hence the cast below.
  const value = Disbursement_StatusSchema.values.find((v) => v.name === status)?.number ?? 0;
  const list = useInfiniteQuery(
    DisbursementService.method.listDisbursements,
    { limit: 20, startingAfter: "", status: value as never },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.disbursements.at(-1)?.id : undefined),
    },
  );
  const rows = list.data?.pages.flatMap((p) => p.disbursements);
  return (
    <div class="panel">
      <h2>Recent disbursements</h2>
      <label>
        Status
        <select value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          <option value="">Any</option>
          {STATUSES.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </label>
      <ErrorBox error={list.error} />
      <ListTable
        label="Recent disbursements"
        columns={RECENT_COLUMNS}
        rows={rows}
        rowKey={(d) => d.id}
        empty={
          status
            ? `No disbursement is ${status}.`
            : "No disbursements yet: create one with POST /partner/v1/disbursements (see the API reference)."
        }
      />
      <LoadMore list={list} />
    </div>
  );
}

/** Principal out and repayments in, a day a bar, over the books' period (naira). */
function BooksChart({ from, to }: { from: string; to: string }) {
  const series = useQuery(DisbursementService.method.getBooksSeries, { from, to });
  const data = useMemo(() => {
    const days = series.data?.days ?? [];
    // Naira for the chart's scale only: the exact figures are the books' own, in kobo, beside it.
    const naira = (k: bigint) => Number(k / 100n);
    return {
      times: days.map((d) => Date.parse(`${d.date}T00:00:00+01:00`) / 1000),
      series: [
        {
          label: "Principal out",
          values: days.map((d) => naira(d.principalOutKobo)),
          color: "#8a4b00",
          bars: true,
        },
        {
          label: "Repayments in",
          values: days.map((d) => naira(d.repaymentsInKobo)),
          color: "#146c2e",
          bars: true,
        },
      ],
    };
  }, [series.data]);
  if (series.error) return <ErrorBox error={series.error} />;
  if (!series.data) return null;
  return <TimeChart times={data.times} series={data.series} unit="naira" step="day" />;
}
