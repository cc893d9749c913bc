import { useQuery } from "@connectrpc/connect-query";
import { useMemo } from "preact/hooks";
import { WebhookService } from "../../../../gen/partner/v1/webhooks_pb.ts";
import { TimeChart } from "../chart.tsx";
import { ErrorBox } from "../ui.tsx";

/** A subscription's last 24 hours, an hour a bar: delivered and failed, and latency p50 and p95. */
export function WebhookStats({ webhookId }: { webhookId: string }) {
  const stats = useQuery(WebhookService.method.getWebhookStats, { id: webhookId });
  const data = useMemo(() => {
    const buckets = stats.data?.buckets ?? [];
    return {
      times: buckets.map((b) => Number(b.startTime?.seconds ?? 0)),
      counts: [
        { label: "Delivered", values: buckets.map((b) => b.delivered), color: "#146c2e", bars: true },
        { label: "Failed", values: buckets.map((b) => b.failed), color: "#b3261e", bars: true },
      ],
      latency: [
        {
          label: "p50 ms",
          values: buckets.map((b) => (b.delivered + b.failed ? b.p50LatencyMs : null)),
          color: "#0b57d0",
        },
        {
          label: "p95 ms",
          values: buckets.map((b) => (b.delivered + b.failed ? b.p95LatencyMs : null)),
          color: "#8a4b00",
        },
      ],
    };
  }, [stats.data]);
  if (stats.error) return <ErrorBox error={stats.error} />;
  if (!stats.data) return null;
  const total = stats.data.total;
  return (
    <section aria-label="The last 24 hours">
      <h2>The last 24 hours</h2>
      {total ? (
        <p>
          {total.delivered} delivered, {total.failed} failed; latency p50 {total.p50LatencyMs} ms, p95{" "}
          {total.p95LatencyMs} ms.
        </p>
      ) : null}
      <div class="charts">
        <TimeChart times={data.times} series={data.counts} unit="attempts" step="hour" />
        <TimeChart times={data.times} series={data.latency} unit="ms" step="hour" />
      </div>
    </section>
  );
}
