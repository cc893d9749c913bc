import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { useTimeZone } from "./time.tsx";

/** One series of a chart: its name (shown in the legend) and values, one per x. */
export interface Series {
  label: string;
  values: (number | null)[];
  color: string;
  /** Bars (counts) rather than a line (latencies). */
  bars?: boolean;
}

/** How a chart's x is labelled: by the hour (the last 24 hours) or by the day (the books). */
export type Step = "hour" | "day";

/** An x value (Unix seconds) as its label, in the chosen time zone, 24 hours, day first. */
function xLabel(seconds: number, step: Step, zone: string): string {
  const options: Intl.DateTimeFormatOptions =
    step === "hour"
      ? { timeZone: zone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" }
      : { timeZone: zone, day: "numeric", month: "short" };
  return new Intl.DateTimeFormat("en-GB", options).format(new Date(seconds * 1000));
}

/**
 * A small time chart (uPlot: canvas, ~20 KB) that follows its container's width. Its legend names each series
 * with its colour and shows the values under the cursor, or the latest values when the cursor is away. The same
 * figures are in the text or table beside it for people who do not read charts, and for screen readers (the
 * canvas is hidden from them).
 */
export function TimeChart(props: {
  times: number[];
  series: Series[];
  unit: string;
  step: Step;
  height?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const zone = useTimeZone();
  const { times, series, unit, step, height = 180 } = props;
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(240, el.clientWidth);
    const last = times.length - 1;
    const latest = (u: uPlot) => u.setLegend({ idx: last });
    const chart = new uPlot(
      {
        width: width(),
        height,
        scales: { x: { time: true } },
        axes: [
          { values: (_u, splits) => splits.map((s) => xLabel(s, step, zone)) },
          { label: unit, size: 56 },
        ],
        series: [
          {
            label: step === "hour" ? "Hour" : "Day",
            value: (_u, v) => (v == null ? "" : xLabel(v, step, zone)),
          },
          ...series.map((s) => ({
            label: s.label,
            stroke: s.color,
            fill: s.bars ? `${s.color}55` : undefined,
            width: 2,
            value: (_u: uPlot, v: number | null) => (v == null ? "none" : v.toLocaleString("en-GB")),
            paths: s.bars ? uPlot.paths.bars?.({ size: [0.6, 40] }) : undefined,
          })),
        ],
        // The cursor leaving the chart shows the latest values again, not dashes.
        hooks: { setCursor: [(u) => u.cursor.idx == null && last >= 0 && latest(u)], ready: [latest] },
      },
      [times, ...series.map((s) => s.values)],
      el,
    );
    const resize = new ResizeObserver(() => chart.setSize({ width: width(), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      chart.destroy();
    };
  }, [times, series, unit, step, height, zone]);
  return <div class="chart" ref={box} aria-hidden="true" />;
}
