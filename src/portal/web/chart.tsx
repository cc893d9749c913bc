import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

/** One series of a chart: its name (shown in the legend) and values, one per x. */
export interface Series {
  label: string;
  values: (number | null)[];
  color: string;
  /** Bars (counts) rather than a line (latencies). */
  bars?: boolean;
}

/**
 * A small time chart (uPlot: canvas, ~20 KB) that follows its container's width. The same figures are in the
 * table beside it for people who do not read charts, and for screen readers (the canvas is hidden from them).
 */
export function TimeChart(props: { times: number[]; series: Series[]; unit: string; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(240, el.clientWidth);
    const chart = new uPlot(
      {
        width: width(),
        height: props.height ?? 180,
        scales: { x: { time: true } },
        axes: [{}, { label: props.unit, size: 56 }],
        series: [
          {},
          ...props.series.map((s) => ({
            label: s.label,
            stroke: s.color,
            fill: s.bars ? `${s.color}55` : undefined,
            width: 2,
            paths: s.bars ? uPlot.paths.bars?.({ size: [0.6, 40] }) : undefined,
          })),
        ],
      },
      [props.times, ...props.series.map((s) => s.values)],
      el,
    );
    const resize = new ResizeObserver(() => chart.setSize({ width: width(), height: props.height ?? 180 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      chart.destroy();
    };
  }, [props.times, props.series, props.unit, props.height]);
  return <div class="chart" ref={box} aria-hidden="true" />;
}
