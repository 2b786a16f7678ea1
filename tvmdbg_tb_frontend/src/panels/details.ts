/** The tabbed lower panel: the selected op (inputs, consumers, fused ops), its tensor values
 * (FULL_TENSOR), its history over executions, and the per-op profile table. */
import type { ExecutionData, OpInfo, OpStats, Profile, ProfileRow, TensorValue, TraceData } from "../api";
import { histogramChart, statsChart } from "../chart";
import { h, setChildren } from "../dom";
import {
  formatCount,
  formatDuration,
  formatLocation,
  hasLine,
  formatShape,
  formatShapeExpr,
  formatValue,
  healthOf,
  healthText,
  isNonFiniteValue,
  plural,
  sortRows,
  summaryHealth,
} from "../format";
import type { PauseInfo, Store } from "../store";
import { innerOpsSection } from "./inner_ops";
import { keepFocus, roving } from "../roving";
import { healthPill, type PillStyle } from "./pill";

type Tab = "op" | "tensor" | "history" | "profile";

export class DetailsPanel {
  readonly el: HTMLElement;
  private readonly tabs: HTMLElement;
  private readonly body: HTMLElement;
  private readonly op: OpView;
  private readonly tensor: TensorView;
  private readonly history: HistoryView;
  private readonly profile: ProfileView;

  constructor(store: Store) {
    this.op = new OpView(store);
    this.tensor = new TensorView(store);
    this.history = new HistoryView(store);
    this.profile = new ProfileView(store);
    this.tabs = h("nav", { class: "tabs", role: "tablist", "aria-label": "details (arrow keys switch)" });
    roving(this.tabs, ".tab", "horizontal", (tab) => this.show(tab.dataset.tab as Tab));
    this.body = h("div", { class: "panel-body details-body" });
    this.el = h("section", { class: "panel details-panel", "data-panel": "details" }, this.tabs, this.body);
    this.show("op");
    store.on("run", () => this.show("op")); // a new run starts on the Op tab
  }

  /** The tab shown, for the keyboard's jump to this panel: on the Op tab, the op's heading
   * (Tab goes on to its inputs' links). */
  focusTarget(): HTMLElement | null {
    if (this.el.dataset.tab === "op") return this.body.querySelector<HTMLElement>(".op-title") ?? this.tabs.querySelector(".tab.active");
    return this.tabs.querySelector<HTMLElement>(".tab.active");
  }

  show(tab: Tab): void {
    this.el.dataset.tab = tab;
    const names: [Tab, string][] = [
      ["op", "Op"],
      ["tensor", "Tensor"],
      ["history", "Op history"],
      ["profile", "Profile"],
    ];
    keepFocus(this.tabs, () =>
      setChildren(
        this.tabs,
        names.map(([t, label]) =>
          h(
            "button",
            {
              role: "tab",
              class: `tab${t === tab ? " active" : ""}`,
              "aria-selected": String(t === tab),
              "data-tab": t,
              "data-key": t,
              tabindex: t === tab ? "0" : "-1",
              onclick: () => this.show(t),
            },
            label,
          ),
        ),
      ),
    );
    const view = { op: this.op, tensor: this.tensor, history: this.history, profile: this.profile }[tab];
    setChildren(this.body, view.el);
    this.el.dataset.panel = tab === "op" ? "details" : tab;
    view.activate();
  }
}

interface View {
  el: HTMLElement;
  activate(): void;
}

class OpView implements View {
  readonly el = h("div", { class: "op-view" });
  constructor(private readonly store: Store) {
    store.on("op", () => this.render());
    store.on("trace", () => this.render());
    store.on("run", () => this.render());
    store.on("pause", () => this.render());
  }
  private seq = 0;
  activate(): void {
    this.render();
  }
  private async render(): Promise<void> {
    const op = this.store.op;
    const t = this.store.trace;
    if (!op) return setChildren(this.el, h("div", { class: "empty" }, "No op selected."));
    const trace = t && t.op_id === op.op_id ? t : null;
    const seq = ++this.seq;
    let call: ExecutionData | null = null;
    try {
      call = trace ? await this.store.executionByIndex(trace.execution_index) : null;
    } catch (err) {
      this.store.reportError(err);
    }
    if (seq !== this.seq) return;
    // The health of its producers and consumers in the call (op_info's, for that call).
    const health = trace && op.execution_index === trace.execution_index ? (op.health ?? {}) : {};
    const pillOf = (opId: number | null, style: PillStyle = "counts") => {
      const x = opId === null ? undefined : health[String(opId)];
      return x ? healthPill(healthOf(x), style) : h("span", { class: "muted small" }, trace ? "not traced" : "—");
    };
    const paramPill = (paramIndex: number | null, tupleItem?: number | null) => {
      let summary = paramIndex === null ? undefined : call?.inputs[paramIndex];
      if (summary && tupleItem !== undefined && tupleItem !== null) {
        // An item of a tuple parameter shows its own health, never the whole tuple's.
        summary = summary.items?.[tupleItem];
        if (!summary) return h("span", { class: "muted small", title: "this dump records only the tuple's total" }, "item not recorded");
      }
      return summary && Object.keys(summary.summary).length
        ? healthPill(summaryHealth(summary), "counts")
        : h("span", { class: "muted small" }, trace ? "not recorded" : "—");
    };
    // While a live program is paused at this op, its inputs as the program sees them (the
    // dump holds the call only once it returns): the Live panel's tensors, here too.
    const pause = this.store.pause;
    const paused = pause && pause.opId === op.op_id && !trace ? pause : null;
    const pausedPill = (slot: number) => {
      const t = paused?.inputs[slot];
      return t?.health
        ? h("span", { class: "paused-health", title: "as the paused program sees it" }, healthPill(t.health, "counts"))
        : h("span", { class: "muted small" }, "not known");
    };
    const inputHealth = (inp: OpInfo["inputs"][number]) =>
      paused
        ? pausedPill(inp.slot)
        : inp.kind === "PARAM"
          ? paramPill(inp.param_index, inp.tuple_item)
          : inp.kind === "CONSTANT"
            ? constantPill(inp)
            : inp.producer_op_id === null
              ? h("span", { class: "muted small" }, "not recorded")
              : pillOf(inp.producer_op_id);
    // What the diagnosis needs first (the op's health, its inputs' health with their numbers,
    // its consumers), then what the kernel is made of.
    keepFocus(
      this.el,
      () =>
        setChildren(
          this.el,
          h(
            "div",
            { class: "op-title", tabindex: "-1", "data-key": "title" },
            h("b", { class: "selected-op-name", "data-testid": "selected-op" }, op.op_name),
            h(
              "span",
              { class: "muted" },
              ` = ${op.kernel}  ·  ${op.call_type}  ·  ${op.device || "cpu"}  ·  ${formatLocation(op.location)}`,
            ),
          ),
          trace ? traceLine(trace) : paused ? pausedLine(paused) : null,
          inputsTable(this.store, op, inputHealth),
          consumersLine(this.store, op, (id) => pillOf(id, "compact")),
          originalOps(this.store, op),
          op.original_ops.length > 1 ? innerOpsSection(this.store, op.op_id, trace ? trace.execution_index : null) : null,
        ),
      "title",
    );
  }
}

/** The selected execution: where, what, and its health with every count. */
function traceLine(trace: TraceData): HTMLElement {
  return h(
    "div",
    { class: "op-trace" },
    h(
      "span",
      { class: "muted" },
      `execution ${trace.execution_index} · output ${trace.output_slot} · ${trace.dtype} ${formatShape(trace.shape)} · ${formatDuration(trace.duration_us)} `,
    ),
    trace.has_error
      ? h("div", { class: "error-box" }, trace.error)
      : h("span", { "data-testid": "selected-health" }, healthPill(healthOf(trace))),
  );
}

/** The paused kernel's outputs, as the program sees them (no trace in the dump yet). */
function pausedLine(pause: PauseInfo): HTMLElement {
  return h(
    "div",
    { class: "op-trace" },
    h("span", { class: "muted" }, `paused in call ${pause.executionIndex} (live; the dump holds it once the call returns) `),
    pause.outputs.map((t, k) => (t.health ? h("span", { "data-testid": k === 0 ? "selected-health" : null }, healthPill(t.health)) : null)),
  );
}

/** A constant input (a weight bound into the module): its name and, when the dump recorded
 * its values' health at compile time, that health. */
function constantPill(inp: OpInfo["inputs"][number]): HTMLElement {
  const summary = inp.constant;
  return summary && Object.keys(summary.summary).length
    ? h(
        "span",
        { class: "constant-health" },
        healthPill(summaryHealth(summary), "counts"),
        h("span", { class: "muted small" }, " constant"),
      )
    : h("span", { class: "muted small", title: "constants are not traced: their values never change" }, "constant, not recorded");
}

function inputsTable(store: Store, op: OpInfo, health: (inp: OpInfo["inputs"][number]) => HTMLElement): HTMLElement {
  return h(
    "table",
    { class: "io-table" },
    h("thead", null, h("tr", null, h("th", null, "input"), h("th", null, "tensor"), h("th", null, "from"), h("th", null, "health here"))),
    h(
      "tbody",
      null,
      op.inputs.map((inp) =>
        h(
          "tr",
          null,
          h("td", null, String(inp.slot)),
          h("td", null, `${inp.name} ${inp.dtype} ${inp.shape_expr ? formatShapeExpr(inp.shape_expr) : formatShape(inp.shape)}`),
          h(
            "td",
            null,
            inp.producer_op_id !== null
              ? h(
                  "a",
                  {
                    href: "#",
                    class: "input-link",
                    "data-key": `in${inp.slot}`,
                    onclick: (e: Event) => (e.preventDefault(), void store.goToOp(inp.producer_op_id!)),
                  },
                  inp.producer_op_name ?? `op ${inp.producer_op_id}`,
                )
              : h("span", { class: "muted" }, inp.kind.toLowerCase()),
          ),
          h("td", { class: "input-health" }, health(inp)),
        ),
      ),
    ),
  );
}

/** The consumers (the first 20 listed as links with their health; the rest counted). */
function consumersLine(store: Store, op: OpInfo, pill: (opId: number) => HTMLElement): HTMLElement {
  const shown = op.consumers.slice(0, 20);
  const more = op.num_consumers - shown.length;
  return h(
    "div",
    { class: "consumers small" },
    h("span", { class: "muted" }, "consumers: "),
    shown.length
      ? shown.map((c) =>
          h(
            "a",
            {
              href: "#",
              class: "consumer-link",
              "data-key": `out${c.op_id}.${c.input_slot}`,
              onclick: (e: Event) => (e.preventDefault(), void store.goToOp(c.op_id)),
            },
            c.op_name,
            " ",
            pill(c.op_id),
            " ",
          ),
        )
      : h("span", { class: "muted" }, "none (a function output)"),
    more > 0 ? h("span", { class: "muted" }, ` and ${formatCount(more)} more`) : null,
  );
}

/** The Relax ops folded into the kernel, each with its line (a click shows it). */
function originalOps(store: Store, op: OpInfo): HTMLElement {
  if (!op.original_ops.length) return h("div", { class: "muted small" }, "No Relax op mapping for this kernel.");
  return h(
    "div",
    { class: "orig-ops" },
    h(
      "div",
      { class: "muted small" },
      op.original_ops.length > 1 ? `Fused kernel: ${op.original_ops.length} original Relax ops` : "Original Relax op",
    ),
    h(
      "ol",
      null,
      op.original_ops.map((o) =>
        h(
          "li",
          {
            class: hasLine(o.location) ? "clickable" : "",
            onclick: () =>
              hasLine(o.location) &&
              store.showFrame({ file_path: o.location.file_path, file_index: -1, line: o.location.line, function: o.location.function }),
          },
          h("code", null, `${o.var_name} = ${o.op_type}`),
          h("span", { class: "muted small" }, `  ${formatLocation(o.location)}`),
        ),
      ),
    ),
  );
}

class TensorView implements View {
  readonly el = h("div", { class: "tensor-view" });
  private sliceInput = h("input", { type: "text", class: "slice-input", placeholder: "slice, e.g. 0:4,::2", "aria-label": "slice" });
  private out = h("div", { class: "tensor-out" });
  private chart = h("div", { class: "tensor-chart" });
  private forPosition: number | null = null;
  private seq = 0;
  constructor(private readonly store: Store) {
    store.on("trace", () => {
      if (this.el.isConnected) this.activate();
    });
  }
  activate(): void {
    const t = this.store.trace;
    if (!t) return setChildren(this.el, h("div", { class: "empty" }, "Select a kernel execution."));
    if (!t.has_value) {
      setChildren(
        this.el,
        h(
          "div",
          { class: "empty" },
          `No tensor value stored for this execution (mode ${t.tensor_debug_mode}). Values are kept with tensor_debug_mode="FULL_TENSOR".`,
        ),
      );
      this.forPosition = null;
      return;
    }
    if (this.forPosition !== t.position) {
      this.forPosition = t.position;
      this.sliceInput.value = ""; // the server picks a view that fits (default_slice)
    }
    const form = h(
      "form",
      {
        class: "slice-form",
        onsubmit: (e: Event) => {
          e.preventDefault();
          void this.load(t);
        },
      },
      h("span", null, `${t.op_name}:${t.output_slot} ${t.dtype} ${formatShape(t.shape)}  [`),
      this.sliceInput,
      h("span", null, "]"),
      h("button", { type: "submit" }, "Show"),
    );
    // The values' histogram (the whole tensor) beside the table (the slice).
    setChildren(this.el, form, h("div", { class: "tensor-layout" }, this.chart, this.out));
    void this.load(t);
    void this.loadHistogram(t);
  }
  private async load(t: TraceData): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    try {
      const v = await this.store.api.tensorValue(run, t.position, this.sliceInput.value.trim());
      if (v.default_slice) this.sliceInput.value = v.slice;
      setChildren(this.out, renderTensor(v));
    } catch (err) {
      setChildren(this.out, h("div", { class: "error-box" }, err instanceof Error ? err.message : String(err)));
    }
  }
  private async loadHistogram(t: TraceData): Promise<void> {
    const run = this.store.run;
    const seq = ++this.seq;
    if (run === null) return;
    setChildren(this.chart, h("div", { class: "muted small" }, "histogram…"));
    try {
      const hist = await this.store.api.tensorHistogram(run, t.position);
      if (seq === this.seq) setChildren(this.chart, histogramChart(hist));
    } catch (err) {
      if (seq === this.seq) setChildren(this.chart, h("div", { class: "muted small" }, err instanceof Error ? err.message : String(err)));
    }
  }
}

/** Values per row when a 1-D tensor is shown (a 1,437-value vector is 144 rows, not one). */
const VECTOR_WRAP = 10;

/** A sliced tensor as a table (scalars, vectors, matrices; higher ranks as a list of matrices).
 * Rows, columns and blocks are labelled with the tensor's own indices (the slice's `axes`):
 * with `::100`, the eleventh value is element 1000, and says so. */
export function renderTensor(v: TensorValue): HTMLElement {
  const axes = v.axes ?? v.sliced_shape.map((_, dim) => ({ dim, start: 0, step: 1 }));
  const indexOf = (axis: number, i: number) => {
    const a = axes[axis];
    return a ? a.start + i * a.step : i;
  };
  const rank = v.sliced_shape.length;
  const cell = (x: unknown) => h("td", { class: isNonFiniteValue(x) ? "nonfinite-value" : "" }, formatValue(x));
  const matrix = (m: unknown): HTMLElement => {
    if (!Array.isArray(m)) return h("table", { class: "tensor-table" }, h("tbody", null, h("tr", null, cell(m))));
    const is1d = !(m.length && Array.isArray(m[0]));
    // A vector wraps into rows of VECTOR_WRAP (the row header is the row's first index, the
    // column header the offset within the row).
    const rows = !is1d
      ? (m as unknown[][])
      : Array.from({ length: Math.max(1, Math.ceil(m.length / VECTOR_WRAP)) }, (_, i) => m.slice(i * VECTOR_WRAP, (i + 1) * VECTOR_WRAP));
    const rowAxis = rank - (is1d ? 1 : 2);
    const colAxis = rank - 1;
    const rowLabel = (i: number) => String(is1d ? indexOf(colAxis, i * VECTOR_WRAP) : indexOf(rowAxis, i));
    const colLabel = (j: number) => (is1d ? (j === 0 ? "" : `+${indexOf(colAxis, j) - indexOf(colAxis, 0)}`) : String(indexOf(colAxis, j)));
    const width = rows.reduce((a, r) => Math.max(a, r.length), 0);
    return h(
      "table",
      { class: "tensor-table" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          h("th", null, ""),
          Array.from({ length: width }, (_, j) => h("th", null, colLabel(j))),
        ),
      ),
      h(
        "tbody",
        null,
        rows.map((r, i) => h("tr", null, h("th", null, rowLabel(i)), r.map(cell))),
      ),
    );
  };
  const blocks: HTMLElement[] = [];
  const walk = (x: unknown, prefix: number[]) => {
    if (Array.isArray(x) && x.length && Array.isArray(x[0]) && Array.isArray((x[0] as unknown[])[0])) {
      (x as unknown[]).forEach((y, i) => walk(y, [...prefix, i]));
    } else {
      blocks.push(
        h(
          "div",
          { class: "tensor-block" },
          prefix.length ? h("div", { class: "muted small" }, `[${prefix.map((p, k) => indexOf(k, p)).join(", ")}, :, :]`) : null,
          matrix(x),
        ),
      );
    }
  };
  walk(v.values, []);
  return h(
    "div",
    null,
    h(
      "div",
      { class: "muted small" },
      `${v.default_slice ? "default view " : ""}slice [${v.slice || ":"}] of ${formatShape(v.shape)} → ${formatShape(v.sliced_shape)}, ${plural(v.num_elements, "element")}${v.truncated ? " (the writer kept only the first elements)" : ""}`,
    ),
    blocks,
  );
}

class HistoryView implements View {
  readonly el = h("div", { class: "history-view" });
  private seq = 0;
  private stats: OpStats | null = null;
  constructor(private readonly store: Store) {
    store.on("op", () => {
      if (this.el.isConnected) this.activate();
    });
    store.on("trace", () => {
      if (this.el.isConnected && this.store.trace?.op_id === this.store.op?.op_id) this.activate();
    });
  }
  async activate(): Promise<void> {
    const run = this.store.run;
    const op = this.store.op;
    if (run === null || !op) return setChildren(this.el, h("div", { class: "empty" }, "No op selected."));
    const seq = ++this.seq;
    const slot = this.store.trace?.op_id === op.op_id ? this.store.trace.output_slot : 0;
    try {
      const head = await this.store.api.opTraces(run, op.op_id, 0, 0, slot);
      const begin = Math.max(0, head.num_traces - 500);
      const fullStats = this.store.runInfo?.tensor_debug_mode === "FULL_STATS";
      const [page, stats] = await Promise.all([
        this.store.api.opTraces(run, op.op_id, begin, head.num_traces, slot),
        fullStats ? this.store.api.opStats(run, op.op_id, slot) : Promise.resolve(null),
      ]);
      if (seq !== this.seq) return;
      this.stats = stats;
      this.render(page.traces, page.num_traces, begin);
    } catch (err) {
      if (seq === this.seq) setChildren(this.el, h("div", { class: "error-box" }, err instanceof Error ? err.message : String(err)));
    }
  }
  private render(traces: TraceData[], total: number, begin: number): void {
    const op = this.store.op!;
    const selected = this.store.tracePosition;
    const rows = [...traces].reverse();
    const selIdx = traces.findIndex((t) => t.position === selected);
    const compare =
      selIdx > 0
        ? h(
            "div",
            { class: "compare" },
            h("div", { class: "compare-title" }, "This execution compared with the previous one"),
            h("span", { class: "muted" }, `previous (${traces[selIdx - 1].execution_index})`),
            healthPill(healthOf(traces[selIdx - 1])),
            h("span", { class: "muted" }, `selected (${traces[selIdx].execution_index})`),
            healthPill(healthOf(traces[selIdx])),
          )
        : null;
    const pickCall = (executionIndex: number) => {
      const t = traces.find((x) => x.execution_index === executionIndex);
      if (t) void this.store.selectTrace(t.position, t.index);
      else void this.store.goToOp(op.op_id);
    };
    setChildren(
      this.el,
      this.stats && this.stats.points.length
        ? h(
            "div",
            { class: "stats-section" },
            h(
              "div",
              { class: "muted small" },
              `${op.op_name}:${this.stats.output_slot} statistics call after call${this.stats.bucketed ? ` (${formatCount(this.stats.num_traces)} calls in ${this.stats.points.length} buckets; each keeps its extremes)` : ""}`,
            ),
            statsChart(this.stats.points, this.store.trace?.op_id === op.op_id ? this.store.trace.execution_index : null, pickCall),
          )
        : null,
      h(
        "div",
        { class: "muted small" },
        `${op.op_name}: ${plural(total, "execution")}${begin > 0 ? ` (the latest ${traces.length} shown)` : ""}, newest first`,
      ),
      compare,
      h(
        "table",
        { class: "history-table" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            h("th", null, "execution"),
            h("th", null, "shape"),
            h("th", null, "time"),
            h("th", null, "health"),
            h("th", null, "change"),
          ),
        ),
        h(
          "tbody",
          null,
          rows.map((t, i) => {
            const prev = rows[i + 1];
            const changed = prev && healthText(healthOf(prev)) !== healthText(healthOf(t));
            return h(
              "tr",
              {
                class: `${t.position === selected ? "selected" : ""}${t.nonfinite ? " nonfinite" : ""}`,
                onclick: () => void this.store.selectTrace(t.position, t.index),
              },
              h("td", null, String(t.execution_index)),
              h("td", null, formatShape(t.shape)),
              h("td", null, formatDuration(t.duration_us)),
              h("td", null, healthPill(healthOf(t), true), " ", h("span", { class: "muted small" }, healthText(healthOf(t)))),
              h(
                "td",
                { class: "small" },
                prev ? (changed ? h("span", { class: "changed" }, "changed") : h("span", { class: "muted" }, "same")) : "",
              ),
            );
          }),
        ),
      ),
    );
  }
}

type SortKey = keyof ProfileRow;

class ProfileView implements View {
  readonly el = h("div", { class: "profile-view" });
  private data: Profile | null = null;
  private graphNames = new Map<number, string>();
  private key: SortKey = "total_us";
  private desc = true;
  private loadedFor = "";
  constructor(private readonly store: Store) {
    store.on("run", () => {
      this.loadedFor = "";
      this.data = null;
      setChildren(this.el); // never the previous run's numbers
      if (this.el.isConnected) void this.activate();
    });
  }
  async activate(): Promise<void> {
    const run = this.store.run;
    if (run === null) return setChildren(this.el, h("div", { class: "empty" }, "No run."));
    const key = `${run}|${this.store.runInfo?.num_traces}`;
    if (key !== this.loadedFor) {
      try {
        const [data, graphs] = await Promise.all([this.store.api.profile(run), this.store.api.graphs(run)]);
        if (this.store.run !== run) return; // switched meanwhile: the newer activate wins
        this.data = data;
        this.graphNames = new Map(graphs.graphs.map((g) => [g.graph_id, g.name]));
        this.loadedFor = key;
      } catch (err) {
        return setChildren(this.el, h("div", { class: "error-box" }, err instanceof Error ? err.message : String(err)));
      }
    }
    this.render();
  }
  private render(): void {
    const p = this.data;
    if (!p) return;
    const cols: [SortKey, string][] = [
      ["op_name", "op"],
      ["kernel", "kernel"],
      ["graph_id", "function"],
      ["calls", "calls"],
      ["total_us", "total"],
      ["mean_us", "mean"],
      ["percent", "%"],
      ["dtype", "dtype"],
    ];
    const rows = sortRows(p.rows, this.key, this.desc);
    setChildren(
      this.el,
      h(
        "div",
        { class: "muted small profile-total", "data-total-us": String(p.total_us), "data-run": this.store.run ?? "" },
        `${formatDuration(p.total_us)} in ${formatCount(p.num_traces)} kernel executions over ${formatCount(p.num_executions)} calls`,
      ),
      h(
        "table",
        { class: "profile-table" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            cols.map(([k, label]) =>
              h(
                "th",
                {
                  class: `sortable${k === this.key ? (this.desc ? " desc" : " asc") : ""}`,
                  "data-sort": k,
                  onclick: () => {
                    this.desc = k === this.key ? !this.desc : typeof p.rows[0]?.[k] === "number";
                    this.key = k;
                    this.render();
                  },
                },
                label,
              ),
            ),
            h("th", null, "shape"),
          ),
        ),
        h(
          "tbody",
          null,
          rows.map((r) =>
            h(
              "tr",
              { onclick: () => void this.store.goToOp(r.op_id) },
              h("td", null, r.op_name),
              h("td", { class: "muted" }, r.kernel),
              h("td", { class: "muted profile-function" }, this.graphNames.get(r.graph_id) ?? String(r.graph_id)),
              h("td", { class: "num" }, formatCount(r.calls)),
              h("td", { class: "num" }, formatDuration(r.total_us)),
              h("td", { class: "num" }, formatDuration(r.mean_us)),
              h(
                "td",
                { class: "num" },
                h("span", { class: "pct-bar", style: { width: `${Math.min(100, r.percent)}%` } }),
                `${r.percent.toFixed(1)}`,
              ),
              h("td", null, r.dtype),
              h("td", null, formatShape(r.shape)),
            ),
          ),
        ),
      ),
    );
  }
}
