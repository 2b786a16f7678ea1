/** Compare view: two runs op by op (the `compare` route, docs/routes.md#compare), a tab of the
 * side column. Pick the run under test (A) and the reference (B), see each op's error in A's
 * execution order with the first divergent op first, and click an op: run A's kernel
 * execution is selected (list, graph, details) and the source shows the compared op's own
 * line, with both sides' statistics here. The graph tags run A's kernels by their verdict
 * (GraphPanel.setMarks) in a palette and shape of their own, never a health colour; clicking
 * a tagged node shows its comparison here. */
import type { LineLocation, Location, Num, RunInfo } from "../api";
import { formatLocation, hasLine } from "../format";
import { h, scrollWithin, setChildren } from "../dom";
import type { Store } from "../store";
import type { GraphPanel, MarkLegend, OpMark } from "./graph";
import { runLabels } from "./header";
import { roving, setTabStop } from "../roving";

interface CompareOp {
  kind: string;
  key: string;
  op_type: string;
  location: Location | null;
  op_id_a?: number;
  trace_index_a?: number;
  op_name_a?: string;
  op_name_b?: string;
  kernel_a?: string;
  fused_ops_a?: { op_type: string; location: Location | null }[];
  status: "within" | "divergent" | "not_comparable";
  reason?: string;
  basis?: string;
  max_abs_error?: Num | null;
  max_rel_error?: Num | null;
  cosine_similarity?: Num | null;
  tolerance?: Num;
  stats_a?: Record<string, Num | string> | null;
  stats_b?: Record<string, Num | string> | null;
  origin?: boolean;
  /** The fused kernel opened up: its first divergent Relax op (docs/compare.md). */
  inner?: CompareInner | null;
}

interface InnerRow {
  index: number;
  op_type: string;
  var_name: string;
  location: Location | null;
  status: "within" | "divergent" | "not_comparable";
  reason?: string;
  max_abs_error?: Num | null;
  /** No counterpart in the other run, but it turned finite operands into NaN/Inf. */
  made_nonfinite?: boolean;
  /** The pass that made this op in place of the user's, and what it made ("ToMixedPrecision: relax.astype"). */
  rewritten_by?: string | null;
}

/** " (ToMixedPrecision: relax.astype)" for an op a pass made of another type, "" otherwise. */
function rewritten(row: InnerRow): string {
  const made = row.rewritten_by?.split(": ")[1];
  return row.rewritten_by && made !== row.op_type ? ` (${row.rewritten_by})` : "";
}

interface CompareInner {
  kernel_a: string | null;
  kernel_b: string | null;
  walked: "A" | "B";
  replayed: string[];
  status: "found" | "not_found" | "needs_values" | "pending";
  op: InnerRow | null;
  /** The kernel whose ops are listed (a producer when the divergence came in through inputs). */
  kernel: string;
  ops: InnerRow[];
  opened: { kernel: string }[];
  reason: string;
  suggestion: string | null;
}

interface CompareResult {
  status: "within" | "divergent" | "cannot_compare";
  error?: string;
  first_divergence: CompareOp | null;
  ops: CompareOp[];
  notes?: string[];
  suggestion?: string | null;
  matched?: { aligned: number; a_only: number; b_only: number; divergent: number };
  function?: string;
  call?: number;
  calls?: CompareCall[];
  execution_index_a?: number;
  execution_index_b?: number;
}

/** One call pair's verdict (call i of A against call i of B), or a call without a pair. */
interface CompareCall {
  function: string;
  call: number;
  status: "within" | "divergent" | "unpaired" | "cannot_compare" | null;
  missing_in?: "A" | "B";
}

/** Up to this many calls are buttons; more are one drop-down. */
const MAX_CALL_BUTTONS = 40;
/** While the fused first divergent kernel is opened on the server: asked again this often, at
 * most this many times. */
const INNER_POLL_MS = 1000;
const INNER_POLLS = 180;

function fmt(v: Num | null | undefined | string): string {
  if (v === null || v === undefined) return "–";
  if (typeof v === "string") return v;
  return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}

function where(loc: Location | null): string {
  return loc ? formatLocation(loc) : "–";
}

/** The verdict tags, shared by the list here and the graph's nodes (and their legend). */
const VERDICTS: { cls: string; tag: string; label: string; short: string }[] = [
  { cls: "cmp-origin", tag: "≠ 1st", label: "first divergence", short: "first divergence" },
  { cls: "cmp-divergent", tag: "≠", label: "beyond tolerance", short: "diverged" },
  { cls: "cmp-within", tag: "=", label: "within tolerance", short: "within" },
  { cls: "cmp-nc", tag: "?", label: "not comparable", short: "n/c" },
];

function verdictOf(o: CompareOp): (typeof VERDICTS)[number] {
  return VERDICTS[o.origin ? 0 : o.status === "divergent" ? 1 : o.status === "within" ? 2 : 3];
}

/** Default runs to compare: A the run being looked at (never a reference), B a PyTorch
 * reference when there is one, else another run of the same script, else any other run. */
export function defaultPair(runs: RunInfo[], selected: string | null): [string, string] {
  const names = runs.map((r) => r.run);
  const isRef = (r: RunInfo) => !!r.reference;
  const a = runs.find((r) => r.run === selected && !isRef(r)) ?? [...runs].reverse().find((r) => !isRef(r)) ?? runs[runs.length - 1];
  if (!a) return ["", ""];
  const others = runs.filter((r) => r.run !== a.run);
  const script = (r: RunInfo) => (r.argv ?? [])[0] ?? "";
  const b =
    [...others].reverse().find(isRef) ??
    [...others].reverse().find((r) => script(r) && script(r) === script(a)) ??
    others[others.length - 1] ??
    a;
  return [a.run, names.includes(b.run) ? b.run : a.run];
}

export class ComparePanel {
  readonly tabId = "compare";
  readonly tabLabel = "Compare";
  readonly el: HTMLElement;
  private readonly runA: HTMLSelectElement;
  private readonly runB: HTMLSelectElement;
  private readonly rtol: HTMLInputElement;
  private readonly atol: HTMLInputElement;
  private readonly body: HTMLElement;
  private readonly detail: HTMLElement;
  /** The wide pane of the results (as wide as the timeline), shown once there are some. */
  readonly results: HTMLElement;
  private readonly resultsTitle: HTMLElement;
  private readonly summary: HTMLElement;
  /** Told whether the results pane has something to show (index.ts opens or closes it). */
  onShape: (open: boolean) => void = () => undefined;
  /** Bumped by each comparison asked: a late answer of an earlier one is dropped. */
  private seq = 0;
  /** The result shown, and the run A it was computed for (the graph's marks follow it). */
  private result: CompareResult | null = null;
  private resultRun = "";
  private shown: CompareOp | null = null;
  /** Whether the user picked A or B (then a new run list keeps the choice). */
  private picked = false;

  constructor(
    private readonly store: Store,
    private readonly graph: GraphPanel | null = null,
  ) {
    this.runA = h("select", { class: "compare-run-a", "aria-label": "run A", onchange: () => (this.picked = true) });
    this.runB = h("select", { class: "compare-run-b", "aria-label": "reference run B", onchange: () => (this.picked = true) });
    this.rtol = h("input", { class: "compare-rtol", value: "1e-4", size: 6, "aria-label": "rtol" });
    this.atol = h("input", { class: "compare-atol", value: "1e-5", size: 6, "aria-label": "atol" });
    this.body = h("div", { class: "compare-body" });
    this.detail = h("div", { class: "compare-detail" });
    this.summary = h("div", { class: "compare-summary small", "data-testid": "compare-summary" });
    this.resultsTitle = h("span", { class: "muted small compare-pair" });
    this.results = h(
      "section",
      { class: "panel compare-results", "data-panel": "compare-results", "data-testid": "compare-results", "aria-label": "comparison" },
      h(
        "header",
        { class: "panel-head" },
        h("h2", null, "Compare"),
        this.resultsTitle,
        h("span", { class: "spacer" }),
        h(
          "button",
          { class: "small-btn", title: "close the comparison (the Compare tab shows it again)", onclick: () => this.onShape(false) },
          "✕",
        ),
      ),
      h("div", { class: "panel-body compare-results-body" }, this.body, this.detail),
    );
    roving(this.body, ".compare-row", "vertical");
    this.el = h(
      "section",
      { class: "panel compare-panel", "data-testid": "compare", "data-panel": "compare", "aria-label": "Compare runs" },
      h(
        "div",
        { class: "panel-body compare-scroll" },
        h(
          "div",
          { class: "compare-controls small" },
          h("label", null, h("span", { class: "muted" }, "run A (under test)"), this.runA),
          h("label", null, h("span", { class: "muted" }, "run B (reference)"), this.runB),
          h(
            "div",
            { class: "compare-tols" },
            h("label", null, "rtol ", this.rtol),
            h("label", null, "atol ", this.atol),
            h("button", { class: "compare-go", onclick: () => void this.compare(null) }, "Compare"),
          ),
        ),
        h(
          "div",
          { class: "compare-legend small", "data-testid": "compare-legend" },
          VERDICTS.map((v) => h("span", { class: "lg-tag" }, h("span", { class: `node-tag-sample tag-${v.cls}` }, v.tag), ` ${v.label}`)),
        ),
        this.summary,
      ),
    );
    store.on("runs", () => this.renderRuns());
    store.on("run", () => this.renderRuns());
    store.on("op", () => this.followGraph());
    store.on("trace", () => this.revealSelection());
  }

  activate(): void {
    this.renderRuns();
    if (this.result) this.onShape(true); // its results, where they were
  }

  /** The list's current op (its Tab stop), else run A's picker: the keyboard's jump here. */
  focusTarget(): HTMLElement | null {
    return this.el.querySelector<HTMLElement>(".compare-row[tabindex='0']") ?? this.runA;
  }

  /** The row of the op selected elsewhere is marked and brought into view. */
  private revealSelection(): void {
    const t = this.store.trace;
    const rows = [...this.body.querySelectorAll<HTMLElement>(".compare-row")];
    for (const r of rows) {
      const on = !!t && this.store.run === this.resultRun && r.dataset.traceIndex === String(t.index);
      r.classList.toggle("selected", on);
      if (on && !this.results.hidden) scrollWithin(this.results.querySelector(".compare-results-body")!, r);
    }
  }

  /** A marked node clicked in the graph (or any selection of a compared op of run A) shows
   * that op's comparison. */
  private followGraph(): void {
    const op = this.store.op;
    if (!this.result || !op || this.store.run !== this.resultRun) return;
    const records = this.result.ops.filter((o) => o.kind === "op" && o.op_id_a === op.op_id);
    const record = records.find((o) => o.origin) ?? records.find((o) => o.status === "divergent") ?? records[0];
    if (record && record !== this.shown) void this.showOp(record);
  }

  /** Run A's kernels tagged by verdict: the first divergence, divergent, within, not comparable. */
  private markGraph(result: CompareResult): void {
    if (!this.graph) return;
    if (result.status === "cannot_compare") return this.graph.setMarks(null);
    const rank = (o: CompareOp) => (o.origin ? 3 : o.status === "divergent" ? 2 : o.status === "not_comparable" ? 1 : 0);
    const worst = new Map<number, CompareOp>();
    for (const o of result.ops) {
      if (o.kind !== "op" || o.op_id_a === undefined) continue;
      const seen = worst.get(o.op_id_a);
      if (!seen || rank(o) > rank(seen)) worst.set(o.op_id_a, o);
    }
    const marks = new Map<number, OpMark>();
    for (const [id, o] of worst) {
      const err =
        o.max_abs_error === undefined ? "" : `, max abs error ${fmt(o.max_abs_error)}${o.basis === "stats" ? " (lower bound)" : ""}`;
      const v = verdictOf(o);
      marks.set(id, { cls: v.cls, tag: v.tag, title: `compare vs ${this.runB.value}: ${v.label}${err}` });
    }
    const legend: MarkLegend = { title: "vs B", items: VERDICTS.map((v) => ({ ...v, label: v.short })) };
    this.graph.setMarks(this.resultRun, marks, legend);
  }

  /** Selects the very kernel execution of run A that was compared (list, graph, details),
   * and shows the compared op's own line: in a fused kernel that is the op that diverged, not
   * the kernel's first op. */
  private async showInGraph(op: CompareOp): Promise<void> {
    if (op.trace_index_a === undefined || this.resultRun === "") return;
    if (this.store.run !== this.resultRun) this.store.pickRun(this.resultRun);
    await this.store.selectTrace(op.trace_index_a, op.trace_index_a);
    const loc = op.location;
    if (hasLine(loc) && this.store.trace?.index === op.trace_index_a)
      this.store.showFrame({ file_path: loc.file_path, file_index: -1, line: loc.line, function: loc.function });
  }

  /** The run pickers, labelled as the header labels runs (name, command, mode, start time),
   * defaulting to the run being looked at against its reference. */
  private renderRuns(): void {
    const runs = this.store.runs;
    const labels = runLabels(runs);
    const [a, b] = defaultPair(runs, this.store.run);
    for (const [select, fallback] of [
      [this.runA, a],
      [this.runB, b],
    ] as const) {
      const same =
        select.options.length === runs.length &&
        [...select.options].every((o, i) => o.value === runs[i].run && o.textContent === labels[i]);
      const chosen = select.value;
      if (!same)
        setChildren(
          select,
          runs.map((r, i) => h("option", { value: r.run, title: r.run }, labels[i])),
        );
      const names = runs.map((r) => r.run);
      select.value = this.picked && names.includes(chosen) ? chosen : fallback;
    }
  }

  /** Compares the chosen runs: the call pair `pick` (null: the first divergent over all calls).
   * The results open in their wide pane; the main panes follow run A's compared call and its
   * first divergent op. While run A's fused first divergent kernel is being opened (replayed
   * op by op on the server, "pending"), the same comparison is asked again each second. */
  async compare(pick: { function: string; call: number } | null): Promise<void> {
    const seq = ++this.seq;
    setChildren(this.body, h("div", { class: "muted" }, "comparing…"));
    setChildren(this.summary, h("span", { class: "muted" }, "comparing…"));
    setChildren(this.detail);
    this.onShape(true);
    this.result = null;
    this.shown = null;
    this.graph?.setMarks(null); // no colours from an earlier comparison while this one runs
    const runA = this.runA.value;
    const params = {
      run_a: this.runA.value,
      run_b: this.runB.value,
      rtol: this.rtol.value,
      atol: this.atol.value,
      ...(pick ? { function: pick.function, call: pick.call } : {}),
    };
    this.resultsTitle.textContent = `${runA} vs ${this.runB.value} (the reference)`;
    try {
      let result = await this.store.api.get<CompareResult>("compare", params);
      if (seq !== this.seq) return;
      this.show(result, runA, true);
      for (let tries = 0; result.first_divergence?.inner?.status === "pending" && tries < INNER_POLLS; tries++) {
        await new Promise((r) => setTimeout(r, INNER_POLL_MS));
        if (seq !== this.seq) return;
        result = await this.store.api.get<CompareResult>("compare", params);
        if (seq !== this.seq) return;
        if (result.first_divergence?.inner?.status !== "pending") this.show(result, runA, false);
      }
    } catch (err) {
      if (seq !== this.seq) return;
      setChildren(this.body, h("div", { class: "compare-error" }, String(err)));
      setChildren(this.summary, h("div", { class: "compare-error" }, String(err)));
    }
  }

  /** A result: its rows and verdicts, the graph's marks, and (the first time) the main panes
   * moved to run A's first divergent op in the compared call, else to that call. */
  private show(result: CompareResult, runA: string, follow: boolean): void {
    this.result = result;
    this.resultRun = runA;
    this.render(result);
    this.markGraph(result);
    const verdict = this.body.querySelector("[data-testid=compare-verdict]");
    setChildren(
      this.summary,
      verdict ? h("div", { class: "compare-verdict-short" }, verdict.textContent ?? "") : null,
      h("div", { class: "muted" }, "The results are in the pane above the kernel list (✕ closes it)."),
    );
    if (!follow || result.status === "cannot_compare") return;
    const first = result.first_divergence;
    if (first) void this.showOp(first).then(() => this.showInGraph(first));
    else if (result.execution_index_a !== undefined) {
      if (this.store.run !== runA) this.store.pickRun(runA);
      this.store.selectExecution(-1, result.execution_index_a);
    }
  }

  private render(result: CompareResult): void {
    if (result.status === "cannot_compare") {
      setChildren(
        this.body,
        h("div", { class: "compare-error", "data-testid": "compare-verdict" }, "Cannot compare: ", result.error ?? ""),
      );
      return;
    }
    const first = result.first_divergence;
    const verdict = first
      ? h(
          "div",
          { class: "compare-verdict divergent", "data-testid": "compare-verdict" },
          `First divergent op: ${first.op_type} ${first.op_name_a ?? ""} at ${where(first.location)}`,
        )
      : h("div", { class: "compare-verdict within", "data-testid": "compare-verdict" }, "Within tolerance");
    const ordered = first ? [first, ...result.ops.filter((o) => o.key !== first.key || o.op_name_a !== first.op_name_a)] : result.ops;
    const rows = ordered.map((op) => this.row(op));
    setTabStop(rows, rows[0] ?? null);
    setChildren(
      this.body,
      verdict,
      this.renderInner(first?.inner ?? null),
      result.matched
        ? h(
            "div",
            { class: "muted small" },
            `${result.function} call ${result.call}: ${result.matched.aligned} aligned, ${result.matched.divergent} beyond tolerance`,
          )
        : null,
      this.renderCalls(result),
      h(
        "table",
        { class: "compare-table", "aria-label": "compared ops, first divergence first (arrow keys move, Enter shows)" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            ["", "op", "A", "B", "line", "max abs", "max rel", "cosine", "basis"].map((c) => h("th", null, c)),
          ),
        ),
        h("tbody", null, rows),
      ),
      (result.notes ?? []).map((n) => h("div", { class: "muted small" }, n)),
      result.suggestion ? h("div", { class: "muted small compare-suggestion" }, result.suggestion) : null,
    );
    this.revealSelection();
  }

  /** One compared op: a row of the table (its verdict tag, names on both sides, line, errors);
   * a click (or Enter) shows its statistics and selects run A's kernel execution everywhere. */
  private row(op: CompareOp): HTMLElement {
    const v = verdictOf(op);
    const num = (x: Num | null | undefined) => (x === undefined || x === null ? "–" : fmt(x));
    const activate = () => {
      void this.showOp(op);
      void this.showInGraph(op);
    };
    return h(
      "tr",
      {
        class: `compare-row ${op.status}${op.origin ? " origin" : ""}`,
        "data-trace-index": op.trace_index_a === undefined ? null : String(op.trace_index_a),
        "data-key": `${op.key}|${op.op_name_a ?? ""}`,
        title: `${op.op_type}${op.op_name_a ? ` (${op.op_name_a} in A)` : ""}${op.op_name_b ? `, ${op.op_name_b} in B` : ""}: ${v.label}${op.reason ? ` (${op.reason})` : ""}`,
        onclick: activate,
        onkeydown: (e: KeyboardEvent) => (e.key === "Enter" || e.key === " ") && (e.preventDefault(), activate()),
      },
      h("td", null, h("span", { class: `node-tag-sample tag-${v.cls}` }, v.tag)),
      h("td", { class: "compare-row-op" }, op.op_type),
      h("td", null, op.op_name_a ?? "–"),
      h("td", { class: "muted" }, op.op_name_b ?? "–"),
      h("td", { class: "muted" }, where(op.location)),
      h("td", { class: "num" }, num(op.max_abs_error)),
      h("td", { class: "num" }, num(op.max_rel_error)),
      h("td", { class: "num" }, num(op.cosine_similarity)),
      h("td", { class: "muted" }, op.basis ?? op.reason ?? ""),
    );
  }

  /** Inside the first divergent fused kernel: the Relax op where the error starts, each inner
   * op's verdict (click one for its line), and which run(s) were replayed op by op. */
  private renderInner(inner: CompareInner | null): HTMLElement | null {
    if (!inner) return null;
    const suggestion = inner.suggestion ? h("div", { class: "muted small compare-suggestion" }, inner.suggestion) : null;
    if (inner.status === "pending")
      return h(
        "div",
        { class: "compare-inner pending", "data-testid": "compare-inner-pending", role: "status" },
        `Inside ${inner.kernel}: ${inner.reason}…`,
      );
    if (inner.status === "needs_values") {
      return h(
        "div",
        { class: "compare-inner", "data-testid": "compare-inner" },
        `Inside the fused kernel: not replayed (${inner.reason})`,
        suggestion,
      );
    }
    const op = inner.op;
    const replayed = inner.replayed.length ? inner.replayed.join(" and ") : "neither";
    const show = (row: InnerRow) => {
      const loc = row.location;
      if (hasLine(loc)) this.store.showFrame({ file_path: loc.file_path, file_index: -1, line: loc.line, function: loc.function });
    };
    return h(
      "div",
      { class: "compare-inner", "data-testid": "compare-inner" },
      h(
        "div",
        { class: `compare-inner-head${op ? " divergent" : ""}` },
        op
          ? `Inside the fused kernel: ${op.op_type} ${op.var_name}${rewritten(op)} at ${where(op.location)}`
          : `Inside the fused kernel: ${inner.reason}`,
        h(
          "span",
          { class: "muted small" },
          ` (in ${inner.kernel}${inner.opened.length > 1 ? `, reached through the inputs of ${inner.opened[0].kernel}` : ""}; replayed op by op: ${replayed})`,
        ),
        op ? h("div", { class: "muted small" }, inner.reason) : null,
      ),
      h(
        "ol",
        { class: "compare-inner-ops small" },
        inner.ops.map((row) =>
          h(
            "li",
            {
              class: `compare-inner-op ${row.status}${row.index === op?.index ? " origin" : ""}`,
              onclick: () => show(row),
              title: row.reason ?? "",
            },
            `${row.index === op?.index ? "★ " : ""}${row.op_type} ${row.var_name}${rewritten(row)} · ${where(row.location)} · ${row.made_nonfinite ? "made NaN/Inf" : row.status}`,
            row.max_abs_error !== undefined && row.max_abs_error !== null ? ` · max abs ${fmt(row.max_abs_error)}` : "",
          ),
        ),
      ),
      suggestion,
    );
  }

  /** Every call pair's verdict; click one to show it (the shown one is marked). Many calls
   * (a long loop) become one drop-down after a count of divergent and unpaired calls. */
  private renderCalls(result: CompareResult): HTMLElement | null {
    const calls = result.calls ?? [];
    if (calls.length < 2) return null;
    const label = (c: CompareCall) =>
      `${c.function} ${c.call}: ${c.status === "unpaired" ? `unpaired (missing in ${c.missing_in})` : (c.status ?? "not checked")}`;
    const isShown = (c: CompareCall) => c.function === result.function && c.call === result.call;
    const pick = (c: CompareCall) => void this.compare({ function: c.function, call: c.call });
    if (calls.length > MAX_CALL_BUTTONS) {
      const divergent = calls.filter((c) => c.status === "divergent").length;
      const unpaired = calls.filter((c) => c.status === "unpaired").length;
      const select = h(
        "select",
        {
          class: "compare-call-select",
          "aria-label": "call",
          onchange: () => {
            const c = calls[Number(select.value)];
            if (c && c.status !== "unpaired") pick(c);
          },
        },
        calls.map((c, i) => h("option", { value: i, selected: isShown(c), disabled: c.status === "unpaired" }, label(c))),
      );
      return h(
        "div",
        { class: "compare-calls small", "data-testid": "compare-calls" },
        `${calls.length} calls (call i of A vs call i of B): ${divergent} divergent, ${unpaired} unpaired; show `,
        select,
      );
    }
    return h(
      "div",
      { class: "compare-calls small", "data-testid": "compare-calls" },
      "calls (call i of A vs call i of B): ",
      calls.map((c) =>
        h(
          "button",
          {
            class: `compare-call small-btn ${c.status ?? "unknown"}${isShown(c) ? " shown" : ""}`,
            "data-call": `${c.function}:${c.call}`,
            disabled: c.status === "unpaired" || isShown(c),
            onclick: () => pick(c),
          },
          label(c),
        ),
      ),
    );
  }

  private async showOp(op: CompareOp): Promise<void> {
    this.shown = op;
    const keys = [...new Set([...Object.keys(op.stats_a ?? {}), ...Object.keys(op.stats_b ?? {})])];
    const line = h("pre", { class: "compare-source" }, "");
    setChildren(
      this.detail,
      h("div", { class: "compare-op-title" }, `${op.op_type} ${op.op_name_a ?? ""} — ${op.status}${op.reason ? ": " + op.reason : ""}`),
      h(
        "div",
        { class: "compare-location", "data-testid": "compare-location" },
        hasLine(op.location)
          ? `${op.location.file_path}:${op.location.line} (${op.location.function})` +
              (op.location.model_node?.format === "onnx" ? `, ${formatLocation({ model_node: op.location.model_node })}` : "")
          : op.location
            ? formatLocation(op.location)
            : "no source line",
      ),
      line,
      op.fused_ops_a && op.fused_ops_a.length > 1
        ? h("div", { class: "small muted" }, "fused in A: ", op.fused_ops_a.map((f) => `${f.op_type} @ ${where(f.location)}`).join(", "))
        : null,
      h(
        "table",
        { class: "compare-stats" },
        h("thead", null, h("tr", null, h("th", null, "statistic"), h("th", null, "A"), h("th", null, "B (reference)"))),
        h(
          "tbody",
          null,
          keys.map((k) =>
            h(
              "tr",
              null,
              h("td", null, k),
              h("td", { class: "num" }, fmt(op.stats_a?.[k])),
              h("td", { class: "num" }, fmt(op.stats_b?.[k])),
            ),
          ),
        ),
      ),
    );
    if (hasLine(op.location)) line.textContent = await this.sourceLine(op.location);
  }

  /** The recorded text of the op's line in run A (or B), when the run kept the file. */
  private async sourceLine(loc: LineLocation): Promise<string> {
    for (const run of [this.runA.value, this.runB.value]) {
      try {
        const files = await this.store.api.get<{ source_files: { index: number; file_path: string }[] }>("source_files/list", { run });
        const file = files.source_files.find((f) => f.file_path === loc.file_path);
        if (!file) continue;
        const text = await this.store.api.sourceFile(run, file.index, loc.line - 1, loc.line);
        return `${loc.line}: ${text.lines[0] ?? ""}`;
      } catch {
        continue;
      }
    }
    return "";
  }
}
