import { useInfiniteQuery, useQuery } from "@connectrpc/connect-query";
import { skipToken } from "@tanstack/react-query";
import { useMemo, useState } from "preact/hooks";
import {
  type Disbursement,
  Disbursement_DestinationSchema,
  Disbursement_StatusSchema,
  DisbursementService,
  Repayment_StatusSchema,
} from "../../../../gen/partner/v1/disbursements_pb.ts";
import { TimeChart } from "../chart.tsx";
import { ErrorBox, enumName, IdLookup, Loading, LoadMore, lagosTime, Page, TableWrap } from "../ui.tsx";

/** Kobo as naira for people to read (exact: integer arithmetic on the bigint, never floating point). */
export function naira(kobo: bigint): string {
  const sign = kobo < 0n ? "-" : "";
  const abs = kobo < 0n ? -kobo : kobo;
  const whole = (abs / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}₦${whole}.${(abs % 100n).toString().padStart(2, "0")}`;
}

/** Today in Lagos as YYYY-MM-DD (the books' days are Lagos days). */
const lagosDay = (d: Date) => new Date(d.getTime() + 60 * 60 * 1000).toISOString().slice(0, 10);

/** A disbursement by id with its repayments, and the books of a period. */
export function DisbursementsPage() {
  return (
    <Page title="Disbursements and books">
      <Recent />
      <LookUp />
      <Books />
    </Page>
  );
}

/** One disbursement's page, reached by its id (`/disbursements/dsb_…`). */
export function DisbursementPage({ id }: { id: string }) {
  const d = useQuery(DisbursementService.method.getDisbursement, { id });
  return (
    <Page title="Disbursement">
      <p>
        <code>{id}</code>
      </p>
      {d.isPending ? <Loading /> : null}
      <ErrorBox error={d.error} />
      {d.data?.disbursement ? <DisbursementCard d={d.data.disbursement} /> : null}
    </Page>
  );
}

function LookUp() {
  const [id, setId] = useState("");
  const d = useQuery(DisbursementService.method.getDisbursement, id ? { id } : skipToken);
  return (
    <div class="panel">
      <h2>Look up a disbursement</h2>
      <IdLookup label="Disbursement id" prefix="dsb" onId={setId} />
      {id && d.isPending ? <Loading /> : null}
      <ErrorBox error={d.error} />
      {d.data?.disbursement ? <DisbursementCard d={d.data.disbursement} /> : null}
    </div>
  );
}

function DisbursementCard({ d }: { d: Disbursement }) {
  const repayments = useQuery(DisbursementService.method.listRepayments, { disbursementId: d.id });
  return (
    <>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          {enumName(Disbursement_StatusSchema, d.status)}
          {d.failureReason ? ` (${d.failureReason})` : ""}
        </dd>
        <dt>User</dt>
        <dd>
          <code>{d.userId}</code>
        </dd>
        <dt>Principal</dt>
        <dd>
          {naira(d.principalKobo)} to the{" "}
          {enumName(Disbursement_DestinationSchema, d.destination).toLowerCase()}
        </dd>
        <dt>Fee</dt>
        <dd>
          {naira(d.feeKobo)} ({d.feeRateBps / 100} %)
        </dd>
        <dt>Repayable</dt>
        <dd>{naira(d.totalRepayableKobo)}</dd>
        <dt>Reference</dt>
        <dd>
          <code>{d.reference}</code>
        </dd>
      </dl>
      <h3>Repayments</h3>
      <ErrorBox error={repayments.error} />
      <TableWrap label="Repayments">
        <table>
          <caption class="visually-hidden">Repayments</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Due</th>
              <th scope="col">Amount</th>
              <th scope="col">Status</th>
              <th scope="col">Id</th>
            </tr>
          </thead>
          <tbody>
            {repayments.data?.repayments.map((r) => (
              <tr key={r.id}>
                <td>{r.seq}</td>
                <td>{r.dueDate}</td>
                <td>{naira(r.amountKobo)}</td>
                <td>{enumName(Repayment_StatusSchema, r.status)}</td>
                <td>
                  <code>{r.id}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </>
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
          <table>
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
                    <time dateTime={b.bookedAt} title={b.bookedAt}>
                      {lagosTime(new Date(b.bookedAt))}
                    </time>
                  </td>
                  <td>
                    <code>{b.kind}</code>
                  </td>
                  <td>{naira(b.amountKobo)}</td>
                  <td>
                    <code>{b.disbursementId}</code>
                  </td>
                  <td>{b.repaymentId ? <code>{b.repaymentId}</code> : null}</td>
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
      <ul>
        {rows?.map((d) => (
          <li key={d.id}>
            <code>{d.id}</code> {enumName(Disbursement_StatusSchema, d.status)}: {naira(d.principalKobo)} to{" "}
            <code>{d.userId}</code>
          </li>
        ))}
      </ul>
      {rows?.length === 0 ? <p>None.</p> : null}
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
  return <TimeChart times={data.times} series={data.series} unit="naira" />;
}
