/**
 * Graph executions: every kernel execution, in a virtual list that stays usable at millions of
 * rows (ScrollMap keeps the scroll element below the browser's height limit), with "go to
 * index" and a filter by op name (the op's own executions, paged by the backend).
 */
import type { Alert, GraphSummary, Op, TraceData } from "../api";
import { h, setChildren } from "../dom";
import { formatShape, healthOf, parseIndex } from "../format";
import { Pager } from "../pager";
import { ScrollMap } from "../scrollmap";
import type { Store } from "../store";
import { healthPill } from "./pill";

const ROW_HEIGHT = 26;

export class ExecutionsPanel {
  readonly el: HTMLElement;
  private readonly scroller: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly windowEl: HTMLElement;
  private readonly countEl: HTMLElement;
  private readonly filterInput: HTMLInputElement;
  private readonly filterInfo: HTMLElement;
  private readonly gotoInput: HTMLInputElement;
  private pager: Pager<TraceData>;
  /** Filter: the op whose executions are listed, or null for all. */
  private filterOp: Op | null = null;
  /** "non-finite only": the list pages over the run's alerts (every non-finite output). */
  private nonfiniteOnly = false;
  private readonly nonfiniteBox: HTMLInputElement;
  private map = new ScrollMap(0, ROW_HEIGHT, 0);
  private ops: Op[] = [];
  /** Function name of each graph, to tell apart ops of the same name in different functions. */
  private graphNames = new Map<number, string>();
  /** The op chosen among several of the same name (a chip click), until the text changes. */
  private pinned: Op | null = null;
  private frame = 0;
  private opsLoadedFor = -1;
  /** Monotonic index of the oldest trace kept, to notice a circular buffer moving on. */
  private firstIndex: number | null = null;
  private openedOnFirstBad = false;

  constructor(private readonly store: Store) {
    this.pager = this.makePager();
    this.countEl = h("span", { class: "muted" });
    this.filterInput = h("input", {
      type: "search",
      placeholder: "filter by op name",
      class: "filter-input",
      "aria-label": "filter by op name",
      oninput: () => {
        this.pinned = null;
        void this.updateFilter();
      },
    });
    this.filterInfo = h("div", { class: "filter-info" });
    this.nonfiniteBox = h("input", {
      type: "checkbox",
      "data-testid": "nonfinite-only",
      onchange: () => void this.setNonfiniteOnly(this.nonfiniteBox.checked),
    });
    this.gotoInput = h("input", { type: "text", placeholder: "go to index", class: "goto-input", "aria-label": "go to index" });
    const goto = h(
      "form",
      {
        class: "goto",
        onsubmit: (e: Event) => {
          e.preventDefault();
          this.goTo(this.gotoInput.value);
        },
      },
      this.gotoInput,
      h("button", { type: "submit" }, "Go"),
    );
    this.spacer = h("div", { class: "vlist-spacer" });
    this.windowEl = h("div", { class: "vlist-window" });
    this.scroller = h(
      "div",
      { class: "vlist", tabindex: "0", onscroll: () => this.schedule(), onkeydown: (e: KeyboardEvent) => this.onKey(e) },
      this.windowEl,
      this.spacer,
    );
    const header = h(
      "div",
      { class: "vlist-row vlist-head" },
      h("span", { class: "c-idx" }, "#"),
      h("span", { class: "c-op" }, "op"),
      h("span", { class: "c-kernel" }, "kernel"),
      h("span", { class: "c-exec" }, "exec"),
      h("span", { class: "c-dtype" }, "dtype"),
      h("span", { class: "c-rank" }, "rank"),
      h("span", { class: "c-shape" }, "shape"),
      h("span", { class: "c-health" }, "health"),
    );
    this.el = h(
      "section",
      { class: "panel executions-panel", "data-panel": "graph-executions" },
      h(
        "header",
        { class: "panel-head" },
        h("h2", null, "Graph executions"),
        this.countEl,
        h("span", { class: "spacer" }),
        h(
          "label",
          { class: "nonfinite-only", title: "list only kernel executions whose output holds NaN or ∞" },
          this.nonfiniteBox,
          "non-finite only",
        ),
        this.filterInput,
        goto,
      ),
      this.filterInfo,
      header,
      this.scroller,
    );
    new ResizeObserver(() => this.relayout()).observe(this.scroller);
    store.on("run", () => this.onRun());
    store.on("runs", () => this.onRunsUpdate());
    store.on("trace", () => this.onSelection());
    store.on("alerts", () => this.openOnFirstBad());
  }

  /** A run with alerts opens the list on its first bad kernel execution (the first origin
   * alert), once per run and only while nothing is selected or filtered. */
  private openOnFirstBad(): void {
    const fb = this.store.firstBad;
    if (this.openedOnFirstBad || !fb || fb.tracePosition === null) return;
    this.openedOnFirstBad = true;
    if (this.store.tracePosition !== null || this.filterOp || this.nonfiniteOnly) return;
    if (fb.tracePosition < this.total) this.scrollToRow(fb.tracePosition);
  }

  private makePager(): Pager<TraceData> {
    return new Pager<TraceData>(async (begin, end) => {
      const run = this.store.run;
      if (run === null) return [];
      if (this.nonfiniteOnly) return (await this.store.api.alerts(run, begin, end)).alerts.map(alertRow);
      if (this.filterOp) return (await this.store.api.opTraces(run, this.filterOp.op_id, begin, end)).traces;
      return (await this.store.api.traces(run, begin, end)).graph_executions;
    }, 200);
  }

  /** Number of rows in the current (filtered) list. */
  get total(): number {
    return this.pager.total;
  }

  private async onRun(): Promise<void> {
    this.filterOp = null;
    this.nonfiniteOnly = false;
    this.nonfiniteBox.checked = false;
    this.filterInput.value = "";
    this.ops = [];
    this.opsLoadedFor = -1;
    this.firstIndex = null;
    this.openedOnFirstBad = false;
    setChildren(this.filterInfo);
    this.pager.reset(this.store.runInfo?.num_traces ?? 0);
    this.scroller.scrollTop = 0;
    this.map = new ScrollMap(0, ROW_HEIGHT, 0);
    this.relayout();
    await this.loadOps();
  }

  /** The ops of every compiled function of the run, for the filter (again when a live program
   * compiles more). */
  private async loadOps(): Promise<void> {
    const run = this.store.run;
    const numOps = this.store.runInfo?.num_ops ?? 0;
    if (run === null || numOps === this.opsLoadedFor) return;
    this.opsLoadedFor = numOps;
    try {
      const graphs: GraphSummary[] = (await this.store.api.graphs(run)).graphs;
      const infos = await Promise.all(graphs.map((g) => this.store.graphInfo(g.graph_id)));
      if (this.store.run === run) {
        this.ops = infos.flatMap((g) => g.ops);
        this.graphNames = new Map(graphs.map((g) => [g.graph_id, g.name]));
      }
    } catch (err) {
      this.opsLoadedFor = -1;
      this.store.reportError(err);
    }
  }

  private async onRunsUpdate(): Promise<void> {
    const info = this.store.runInfo;
    const run = this.store.run;
    if (!info || run === null) return;
    void this.loadOps();
    let total = info.num_traces;
    try {
      if (this.filterOp) {
        if (!info.live) return this.render();
        const op = this.filterOp;
        total = (await this.store.api.opTraces(run, op.op_id, 0, 0)).num_traces;
        if (this.store.run !== run || this.filterOp !== op) return;
      } else if (info.live && total > 0 && (info.circular_buffer_size ?? 0) > 0) {
        // A full circular buffer drops the oldest traces: positions shift while the count stays.
        const head = (await this.store.api.traces(run, 0, 1)).graph_executions[0];
        if (this.store.run !== run) return;
        if (head && this.firstIndex !== null && head.index !== this.firstIndex) this.pager.reset(total);
        this.firstIndex = head?.index ?? null;
      }
    } catch (err) {
      this.store.reportError(err);
    }
    if (total !== this.pager.total) {
      this.pager.grow(total);
      this.relayout();
    } else this.render();
  }

  private async updateFilter(): Promise<void> {
    const text = this.filterInput.value.trim();
    const matches = text ? this.ops.filter((op) => op.op_name.includes(text) || op.kernel.includes(text)) : [];
    const sameName = matches.filter((op) => op.op_name === text);
    // The same var name in several functions is ambiguous: the user picks one (a chip).
    const exact =
      this.pinned && this.pinned.op_name === text
        ? this.pinned
        : sameName.length === 1
          ? sameName[0]
          : matches.length === 1
            ? matches[0]
            : null;
    const label = (op: Op) => {
      const fn = this.graphNames.get(op.graph_id);
      return this.graphNames.size > 1 && fn ? `${op.op_name} · ${fn}` : op.op_name;
    };
    setChildren(
      this.filterInfo,
      text && !matches.length ? h("span", { class: "muted" }, `no op matches “${text}”`) : null,
      matches.length > 1
        ? [
            h("span", { class: "muted" }, `${matches.length} ops match: `),
            matches.slice(0, 30).map((op) =>
              h(
                "button",
                {
                  class: `chip${exact === op ? " active" : ""}`,
                  "data-op-id": String(op.op_id),
                  onclick: () => {
                    this.filterInput.value = op.op_name;
                    this.pinned = op;
                    void this.updateFilter();
                  },
                },
                label(op),
              ),
            ),
          ]
        : null,
    );
    await this.setFilterOp(text ? exact : null);
  }

  /** Lists only the non-finite outputs (the run's alerts, counted over all of them), or all. */
  private async setNonfiniteOnly(on: boolean): Promise<void> {
    this.nonfiniteOnly = on;
    this.nonfiniteBox.checked = on;
    const run = this.store.run;
    let total = this.store.runInfo?.num_traces ?? 0;
    if (on) {
      this.filterOp = null;
      this.filterInput.value = "";
      setChildren(this.filterInfo);
      total = 0;
      if (run !== null) {
        try {
          total = (await this.store.api.alerts(run, 0, 0)).num_alerts;
        } catch (err) {
          this.store.reportError(err);
        }
      }
      if (!this.nonfiniteOnly || this.store.run !== run) return;
    }
    this.pager.reset(total);
    this.scroller.scrollTop = 0;
    this.map = new ScrollMap(0, ROW_HEIGHT, 0);
    this.relayout();
  }

  private async setFilterOp(op: Op | null): Promise<void> {
    if (op?.op_id === this.filterOp?.op_id && !(op && this.nonfiniteOnly)) return;
    if (op && this.nonfiniteOnly) {
      this.nonfiniteOnly = false;
      this.nonfiniteBox.checked = false;
    }
    this.filterOp = op;
    const run = this.store.run;
    let total = this.store.runInfo?.num_traces ?? 0;
    if (op && run !== null) {
      try {
        total = (await this.store.api.opTraces(run, op.op_id, 0, 0)).num_traces;
      } catch (err) {
        this.store.reportError(err);
        total = 0;
      }
      if (this.filterOp !== op) return;
    }
    this.pager.reset(total);
    this.scroller.scrollTop = 0;
    this.map = new ScrollMap(0, ROW_HEIGHT, 0);
    this.relayout();
  }

  /** Scrolls to a row of the current list and selects it. */
  async goTo(text: string): Promise<void> {
    const row = parseIndex(text, this.total);
    this.gotoInput.classList.toggle("invalid", row === null);
    if (row === null) return;
    this.scrollToRow(row);
    await this.pager.ensure(row, row + 1).catch((err) => this.store.reportError(err));
    const trace = this.pager.get(row);
    if (trace) void this.store.selectTrace(trace.position, trace.index);
  }

  private scrollToRow(row: number): void {
    if (!this.map.isFullyVisible(row, this.scroller.scrollTop)) this.scroller.scrollTop = this.map.scrollTopFor(row, "center");
    this.render();
  }

  private onSelection(): void {
    const pos = this.store.tracePosition;
    if (pos === null) return this.render();
    if (this.filterOp && this.store.trace && this.store.trace.op_id !== this.filterOp.op_id) {
      this.filterInput.value = "";
      void this.updateFilter().then(() => this.scrollToRow(pos));
      return;
    }
    if (!this.filterOp && !this.nonfiniteOnly) this.scrollToRow(pos);
    else this.render();
  }

  private onKey(e: KeyboardEvent): void {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    e.preventDefault();
    const current = this.selectedRow() ?? -1;
    const next = Math.min(this.total - 1, Math.max(0, current + (e.key === "ArrowDown" ? 1 : -1)));
    void this.goTo(String(next));
  }

  /** Row of the selected trace in the current list, when it is known. */
  private selectedRow(): number | null {
    const pos = this.store.tracePosition;
    if (pos === null) return null;
    if (!this.filterOp && !this.nonfiniteOnly) return pos;
    const w = this.map.window(this.scroller.scrollTop);
    for (let i = w.first; i < w.end; i++) if (this.pager.get(i)?.position === pos) return i;
    return null;
  }

  /** Rebuilds the scroll mapping after the row count or the viewport changed, keeping the rows
   * in view where they were (at scale, the same scrollTop would show other rows). */
  private relayout(): void {
    const contentTop = this.map.contentTopFor(this.scroller.scrollTop);
    this.map = new ScrollMap(this.total, ROW_HEIGHT, this.scroller.clientHeight);
    // The sticky window takes one viewport of the scroll height; the spacer adds the rest.
    this.spacer.style.height = `${Math.max(0, this.map.spacerHeight - this.scroller.clientHeight)}px`;
    const scrollTop = this.map.scrollTopForContent(contentTop);
    if (Math.abs(scrollTop - this.scroller.scrollTop) >= 1) this.scroller.scrollTop = scrollTop;
    this.countEl.textContent = this.filterOp
      ? `${this.total.toLocaleString("en-US")} executions of ${this.filterOp.op_name}`
      : this.nonfiniteOnly
        ? `${this.total.toLocaleString("en-US")} non-finite kernel executions`
        : `${this.total.toLocaleString("en-US")} kernel executions`;
    this.render();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private render(): void {
    const w = this.map.window(this.scroller.scrollTop);
    this.windowEl.style.height = `${this.scroller.clientHeight}px`;
    const rows: HTMLElement[] = [];
    let missing = false;
    for (let i = w.first; i < w.end; i++) {
      const t = this.pager.get(i);
      const top = w.offsetPx + (i - w.first) * ROW_HEIGHT;
      if (!t) {
        missing = true;
        rows.push(
          h(
            "div",
            { class: "vlist-row loading", style: { top: `${top}px` } },
            h("span", { class: "c-idx" }, String(i)),
            h("span", { class: "muted" }, "loading…"),
          ),
        );
        continue;
      }
      // By monotonic index once the selection is loaded: positions shift in a circular buffer.
      const selected = this.store.trace ? t.index === this.store.trace.index : t.position === this.store.tracePosition;
      const health = healthOf(t);
      rows.push(
        h(
          "div",
          {
            class: `vlist-row${selected ? " selected" : ""}${t.nonfinite ? " nonfinite" : ""}${t.has_error ? " errored" : ""}`,
            style: { top: `${top}px` },
            "data-row": String(i),
            "data-position": String(t.position),
            "data-op-name": t.op_name,
            onclick: () => void this.store.selectTrace(t.position, t.index),
          },
          h("span", { class: "c-idx" }, String(i)),
          h(
            "span",
            { class: "c-op", title: t.op_name },
            t.op_name,
            t.output_slot ? h("span", { class: "muted" }, `:${t.output_slot}`) : null,
          ),
          h("span", { class: "c-kernel", title: t.kernel }, t.kernel),
          h("span", { class: "c-exec muted" }, String(t.execution_index)),
          h("span", { class: "c-dtype" }, t.dtype),
          h("span", { class: "c-rank" }, t.dtype ? String(t.shape.length) : ""),
          h("span", { class: "c-shape", title: formatShape(t.shape) }, formatShape(t.shape)),
          h(
            "span",
            { class: "c-health" },
            t.has_error ? h("span", { class: "error-text", title: t.error }, "error") : healthPill(health, true),
          ),
        ),
      );
    }
    setChildren(this.windowEl, rows);
    if (this.total === 0)
      setChildren(
        this.windowEl,
        h(
          "div",
          { class: "empty" },
          this.filterOp
            ? "This op has no recorded executions."
            : this.nonfiniteOnly
              ? "No non-finite output recorded."
              : "No kernel executions recorded yet.",
        ),
      );
    if (missing) {
      const run = this.store.run;
      this.pager
        .ensure(w.first, w.end)
        .then(() => {
          if (this.store.run === run) this.render();
        })
        .catch((err) => this.store.reportError(err));
    }
  }
}

/** A list row for an alert (a non-finite output): its counts and place; dtype and shape are
 * shown once it is selected (the alert does not carry them). */
function alertRow(a: Alert): TraceData {
  return {
    position: a.trace_position ?? -1,
    index: a.trace_index,
    op_id: a.op_id,
    op_name: a.op_name,
    kernel: a.kernel,
    graph_id: a.graph_id,
    output_slot: a.output_slot,
    execution_index: a.execution_index,
    wall_time: a.wall_time,
    duration_us: null,
    nan: a.nan_count,
    neg_inf: a.neg_inf_count,
    pos_inf: a.pos_inf_count,
    nonfinite: true,
    has_error: false,
    tensor_debug_mode: "",
    debug_values: [],
    summary: a.size === null ? {} : { size: a.size },
    dtype: "",
    shape: [],
    device: "",
    error: "",
    has_value: false,
  };
}
