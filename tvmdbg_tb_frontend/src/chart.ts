/** Two small SVG charts for the details panel: a histogram of a tensor's values (with its
 * NaN/±∞ counts as bars of their own, in the health colours) and a per-call line chart of an
 * op's statistics. Drawn at the size of their box; text is HTML or 12 px SVG. */
import type { Histogram, StatsPoint } from "./api";
import { h, svg } from "./dom";
import { formatCount, formatValue } from "./format";

const W = 360;
const H = 150;
const PAD = { left: 8, right: 8, top: 8, bottom: 22 };

/** Short axis labels: 1.2e-5, 0.25, 1200. */
function tick(v: number): string {
  return formatValue(Number(v.toPrecision(3)));
}

/** Margins of the histogram: room for its count axis on the left. */
const HPAD = { left: 46, right: 8, top: 14, bottom: 22 };

/** The histogram of a FULL_TENSOR value, non-finite counts after the finite bins: a count axis
 * (0, half, the tallest bar), the value axis's first, middle and last edges, and the NaN/±∞
 * bars labelled with their counts. */
export function histogramChart(hist: Histogram): HTMLElement {
  const special = [
    { label: "NaN", count: hist.nan, cls: "seg-nan" },
    { label: "-∞", count: hist.neg_inf, cls: "seg-neg-inf" },
    { label: "+∞", count: hist.pos_inf, cls: "seg-pos-inf" },
  ].filter((s) => s.count > 0);
  const bins = hist.counts.length;
  const slots = bins + (special.length ? special.length + 1 : 0);
  const max = Math.max(1, ...hist.counts, ...special.map((s) => s.count));
  const plotW = W - HPAD.left - HPAD.right;
  const plotH = H - HPAD.top - HPAD.bottom;
  const bw = plotW / Math.max(1, slots);
  const root = svg("svg", {
    class: "chart histogram-chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": `histogram of ${formatCount(hist.finite)} finite values${special.map((s) => `, ${s.label} ${s.count}`).join("")}`,
  });
  const text = (x: number, y: number, value: string, anchor: string, cls = "axis-label") => {
    const t = svg("text", { x, y, "text-anchor": anchor, class: cls });
    t.textContent = value;
    root.appendChild(t);
  };
  // The count axis: 0, half and the tallest bar, with faint grid lines.
  for (const v of [0, max / 2, max]) {
    const y = HPAD.top + plotH - (v / max) * plotH;
    if (v > 0) root.appendChild(svg("line", { x1: HPAD.left, x2: W - HPAD.right, y1: y, y2: y, class: "grid" }));
    text(HPAD.left - 4, y + 4, formatCount(v), "end");
  }
  root.appendChild(svg("line", { x1: HPAD.left, x2: HPAD.left, y1: HPAD.top, y2: HPAD.top + plotH, class: "axis" }));
  const bar = (i: number, count: number, cls: string, title: string) => {
    const bh = (count / max) * plotH;
    const r = svg("rect", {
      x: HPAD.left + i * bw + 0.5,
      y: HPAD.top + plotH - bh,
      width: Math.max(1, bw - 1),
      height: Math.max(count ? 1 : 0, bh),
      class: `bar ${cls}`,
    });
    const t = svg("title");
    t.textContent = title;
    r.appendChild(t);
    root.appendChild(r);
  };
  hist.counts.forEach((c, i) =>
    bar(i, c, "bar-finite", `[${formatValue(hist.edges[i])}, ${formatValue(hist.edges[i + 1])}): ${formatCount(c)}`),
  );
  special.forEach((s, k) => {
    bar(bins + 1 + k, s.count, s.cls, `${s.label}: ${formatCount(s.count)}`);
    text(
      HPAD.left + (bins + 1.5 + k) * bw,
      HPAD.top + plotH - (s.count / max) * plotH - 3,
      formatCount(s.count),
      "middle",
      "axis-label bar-count",
    );
  });
  root.appendChild(svg("line", { x1: HPAD.left, x2: W - HPAD.right, y1: HPAD.top + plotH, y2: HPAD.top + plotH, class: "axis" }));
  if (bins) {
    text(HPAD.left, H - 6, tick(hist.edges[0]), "start");
    if (bins > 2) text(HPAD.left + (bins / 2) * bw, H - 6, tick(hist.edges[Math.floor(bins / 2)]), "middle");
    text(HPAD.left + bins * bw, H - 6, tick(hist.edges[bins]), special.length ? "middle" : "end");
  }
  special.forEach((s, k) => text(HPAD.left + (bins + 1.5 + k) * bw, H - 6, s.label, "middle"));
  return h(
    "figure",
    { class: "chart-box", "data-testid": "tensor-histogram" },
    root,
    h(
      "figcaption",
      { class: "muted small" },
      `${formatCount(hist.finite)} finite value${hist.finite === 1 ? "" : "s"}`,
      hist.min !== null ? ` in [${formatValue(hist.min)}, ${formatValue(hist.max)}]` : "",
      special.map((s) => ` · ${s.label} ${formatCount(s.count)}`).join(""),
      ` · ${bins} bins; bar height: values per bin`,
      hist.truncated ? " · the writer kept only the first elements" : "",
    ),
  );
}

const SERIES: { key: keyof StatsPoint; label: string; cls: string }[] = [
  { key: "max", label: "max", cls: "line-max" },
  { key: "mean", label: "mean", cls: "line-mean" },
  { key: "min", label: "min", cls: "line-min" },
  { key: "abs_max", label: "|max|", cls: "line-absmax" },
];

/** min / mean / max / abs-max of one op's output, call after call; calls with non-finite
 * values are marked on the axis. `selected` is the execution shown elsewhere. */
export function statsChart(points: StatsPoint[], selected: number | null, onPick: (executionIndex: number) => void): HTMLElement {
  const values = points.flatMap((p) => SERIES.map((s) => p[s.key] as number | null)).filter((v): v is number => v !== null);
  const lo = values.length ? Math.min(...values) : 0;
  const hi = values.length ? Math.max(...values) : 1;
  const span = hi - lo || Math.abs(hi) || 1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (points.length <= 1 ? plotW / 2 : (i / (points.length - 1)) * plotW);
  const y = (v: number) => PAD.top + plotH - ((v - lo) / span) * plotH;
  const root = svg("svg", {
    class: "chart stats-chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": `min, mean, max and abs-max over ${points.length} calls`,
  });
  root.appendChild(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: PAD.top + plotH, y2: PAD.top + plotH, class: "axis" }));
  for (const s of SERIES) {
    let d = "";
    points.forEach((p, i) => {
      const v = p[s.key] as number | null;
      if (v === null) return;
      d += `${d && points[i - 1]?.[s.key] !== null ? "L" : "M"} ${x(i).toFixed(1)} ${y(v).toFixed(1)} `;
    });
    if (d) root.appendChild(svg("path", { d, class: `series ${s.cls}` }));
  }
  points.forEach((p, i) => {
    const bad = p.nan + p.neg_inf + p.pos_inf > 0;
    const on = selected !== null && selected >= p.execution_index && selected <= p.last_execution_index;
    if (!bad && !on) return;
    const m = svg("rect", {
      x: x(i) - 3,
      y: on ? PAD.top : PAD.top + plotH - 6,
      width: 6,
      height: on ? plotH : 6,
      class: on ? "chart-selected" : "chart-bad",
    });
    root.appendChild(m);
  });
  // One transparent column per point: hover says the values, a click selects that call.
  points.forEach((p, i) => {
    const w = points.length <= 1 ? plotW : plotW / (points.length - 1);
    const hit = svg("rect", {
      x: x(i) - w / 2,
      y: PAD.top,
      width: w,
      height: plotH,
      class: "chart-hit",
      "data-execution": p.execution_index,
    });
    const t = svg("title");
    const calls = p.num_traces > 1 ? `calls ${p.execution_index}–${p.last_execution_index}` : `call ${p.execution_index}`;
    t.textContent = `${calls}: ${SERIES.map((s) => `${s.label} ${p[s.key] === null ? "–" : formatValue(p[s.key])}`).join(", ")}${p.nan + p.neg_inf + p.pos_inf ? ` · NaN ${p.nan}, -∞ ${p.neg_inf}, +∞ ${p.pos_inf}` : ""}`;
    hit.appendChild(t);
    hit.addEventListener("click", () => onPick(p.execution_index));
    root.appendChild(hit);
  });
  const first = points[0];
  const last = points[points.length - 1];
  const axis = (px: number, text: string, anchor: string) => {
    const t = svg("text", { x: px, y: H - 6, "text-anchor": anchor, class: "axis-label" });
    t.textContent = text;
    root.appendChild(t);
  };
  if (first) {
    axis(PAD.left, `call ${first.execution_index}`, "start");
    if (last !== first) axis(W - PAD.right, `call ${last.last_execution_index}`, "end");
  }
  return h(
    "figure",
    { class: "chart-box", "data-testid": "stats-chart" },
    root,
    h(
      "figcaption",
      { class: "chart-legend small" },
      SERIES.map((s) => h("span", { class: `lg-line ${s.cls}` }, s.label)),
      h("span", { class: "muted" }, ` range [${formatValue(lo)}, ${formatValue(hi)}]`),
    ),
  );
}
