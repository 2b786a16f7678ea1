/**
 * Graph executions: every kernel execution, in a virtual list that stays usable at millions of
 * rows (ScrollMap keeps the scroll element below the browser's height limit), with "go to
 * index", a filter by op name (the op's own executions, paged by the backend) and "non-finite
 * only" (the run's alerts). Whatever is selected elsewhere is brought into view here. While a
 * live program is paused, the kernels its call ran so far (not in the dump until the call
 * returns) follow the recorded ones, the paused kernel selected.
 */
import { ApiError, type Alert, type Op, type PausedTrace, type SearchAnswer, type TraceData } from "../api";
import { type Child, h, setChildren } from "../dom";
import { formatCount, formatShape, healthOf, parseIndex, plural } from "../format";
import { Pager } from "../pager";
import { ScrollMap } from "../scrollmap";
import type { Store } from "../store";
import { healthPill } from "./pill";

const ROW_HEIGHT = 26;
/** Ops the filter lists as chips. */
const FILTER_CHIPS = 30;

/** What the list shows: every kernel execution, one op's, the non-finite ones, or nothing
 * (a filter that matches no op). */
type ListMode = "all" | "op" | "nonfinite" | "none";

export class ExecutionsPanel {
  readonly el: HTMLElement;
  private readonly scroller: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly windowEl: HTMLElement;
  private readonly countEl: HTMLElement;
  private readonly filterInput: HTMLInputElement;
  private readonly filterInfo: HTMLElement;
  private readonly gotoInput: HTMLInputElement;
  private readonly gotoMessage: HTMLElement;
  private pager: Pager<TraceData>;
  /** The paused call's kernel traces so far (live/paused_call), for the pause `pausedFor`. */
  private readonly paused: Pager<PausedTrace>;
  private pausedFor: number | null = null;
  private mode: ListMode = "all";
  /** Filter: the op whose executions are listed (mode "op"). */
  private filterOp: Op | null = null;
  private readonly nonfiniteBox: HTMLInputElement;
  private map = new ScrollMap(0, ROW_HEIGHT, 0);
  /** Bumped by every filter text: a slow search for older text is dropped. */
  private filterSeq = 0;
  /** The op chosen among several of the same name (a chip click), until the text changes. */
  private pinned: Op | null = null;
  private frame = 0;
  /** Monotonic index of the oldest trace kept, to notice a circular buffer moving on. */
  private firstIndex: number | null = null;
  private openedOnFirstBad = false;
  /** Bumped by every change of mode: a slow count for an older mode is dropped. */
  private modeSeq = 0;

  constructor(private readonly store: Store) {
    this.pager = this.makePager();
    this.paused = this.makePausedPager();
    this.countEl = h("span", { class: "muted count" });
    this.filterInput = h("input", {
      type: "search",
      placeholder: "filter by op name",
      class: "filter-input",
      "aria-label": "filter by op name",
      oninput: () => {
        this.pinned = null;
        this.filterInfo.setAttribute("aria-busy", "true"); // its chips answer older text
        void this.updateFilter();
      },
    });
    this.filterInfo = h("div", { class: "filter-info" });
    this.nonfiniteBox = h("input", {
      type: "checkbox",
      "data-testid": "nonfinite-only",
      onchange: () => void this.setNonfiniteOnly(this.nonfiniteBox.checked),
    });
    this.gotoInput = h("input", {
      type: "text",
      placeholder: "go to #",
      class: "goto-input",
      "aria-label": "go to index",
      oninput: () => this.sayGoto(""),
    });
    this.gotoMessage = h("div", { class: "goto-message", role: "status", "data-testid": "goto-message" });
    const goto = h(
      "form",
      {
        class: "goto",
        onsubmit: (e: Event) => {
          e.preventDefault();
          void this.goTo(this.gotoInput.value);
        },
      },
      this.gotoInput,
      h("button", { type: "submit" }, "Go"),
    );
    this.spacer = h("div", { class: "vlist-spacer" });
    this.windowEl = h("div", { class: "vlist-window" });
    this.scroller = h(
      "div",
      {
        class: "vlist",
        tabindex: "0",
        "aria-label": "kernel executions (arrow keys move the selection)",
        onscroll: () => this.schedule(),
        onkeydown: (e: KeyboardEvent) => this.onKey(e),
      },
      this.windowEl,
      this.spacer,
    );
    const header = h(
      "div",
      { class: "vlist-row vlist-head" },
      h("span", { class: "c-idx" }, "#"),
      h("span", { class: "c-op" }, "op"),
      h("span", { class: "c-kernel" }, "kernel"),
      h("span", { class: "c-exec", title: "the call (top-level execution) it ran in" }, "call"),
      h("span", { class: "c-tensor" }, "output"),
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
          "NaN/∞ only",
        ),
        this.filterInput,
        goto,
      ),
      this.gotoMessage,
      this.filterInfo,
      header,
      this.scroller,
    );
    new ResizeObserver(() => this.onResize()).observe(this.scroller);
    store.on("run", () => this.onRun());
    store.on("runs", () => this.onRunsUpdate());
    store.on("trace", () => this.onSelection());
    store.on("alerts", () => this.openOnFirstBad());
    store.on("pause", () => this.onPause());
  }

  /** The list itself (arrow keys move its selection), for the keyboard's jump to this panel. */
  focusTarget(): HTMLElement {
    return this.scroller;
  }

  /** A new pause (or none): its call's rows so far replace the previous pause's. */
  private onPause(): void {
    const pause = this.store.pause;
    this.pausedFor = pause?.pauseId ?? null;
    this.paused.reset(pause?.callTraces ?? 0);
    this.relayout();
  }

  private makePausedPager(): Pager<PausedTrace> {
    return new Pager<PausedTrace>(async (begin, end) => {
      const run = this.store.run;
      const pause = this.store.pause;
      if (run === null || pause === null) return [];
      try {
        const page = await this.store.api.pausedCall(run, begin, end);
        return page.pause_id === pause.pauseId ? page.rows : [];
      } catch (err) {
        // The program resumed (409) or ended (404) meanwhile: its call is the dump's now.
        if (err instanceof ApiError && (err.status === 409 || err.status === 404)) return [];
        throw err;
      }
    }, 200);
  }

  /** Rows of the paused call shown after the recorded ones (the whole list only). */
  private get pausedShown(): number {
    const pause = this.store.pause;
    return this.mode === "all" && pause !== null && this.pausedFor === pause.pauseId ? this.paused.total : 0;
  }

  /** Rows in the list: the recorded ones, then the paused call's. */
  private get rowCount(): number {
    return this.total + this.pausedShown;
  }

  /** A run with alerts opens the list on its first bad kernel execution (the first origin
   * alert), once per run and only while nothing is selected or filtered. */
  private openOnFirstBad(): void {
    const fb = this.store.firstBad;
    if (this.openedOnFirstBad || !fb || fb.tracePosition === null) return;
    this.openedOnFirstBad = true;
    if (this.store.tracePosition !== null || this.store.pausedRow !== null || this.mode !== "all") return;
    if (fb.tracePosition < this.total) this.scrollToRow(fb.tracePosition);
  }

  private makePager(): Pager<TraceData> {
    return new Pager<TraceData>(async (begin, end) => {
      const run = this.store.run;
      if (run === null || this.mode === "none") return [];
      if (this.mode === "nonfinite") return (await this.store.api.alerts(run, begin, end)).alerts.map(alertRow);
      if (this.mode === "op" && this.filterOp) return (await this.store.api.opTraces(run, this.filterOp.op_id, begin, end)).traces;
      return (await this.store.api.traces(run, begin, end)).graph_executions;
    }, 200);
  }

  /** Number of rows in the current (filtered) list. */
  get total(): number {
    return this.pager.total;
  }

  /** The number of rows the current mode lists now, asked from the backend for filters. */
  private async countRows(run: string): Promise<number> {
    if (this.mode === "none") return 0;
    if (this.mode === "nonfinite") return (await this.store.api.alerts(run, 0, 0)).num_alerts;
    if (this.mode === "op" && this.filterOp) return (await this.store.api.opTraces(run, this.filterOp.op_id, 0, 0)).num_traces;
    return this.store.runInfo?.num_traces ?? 0;
  }

  private onRun(): void {
    this.mode = "all";
    this.modeSeq += 1;
    this.filterOp = null;
    this.nonfiniteBox.checked = false;
    this.clearFilter();
    this.firstIndex = null;
    this.openedOnFirstBad = false;
    this.pausedFor = null;
    this.paused.reset(0);
    this.sayGoto("");
    this.pager.reset(this.store.runInfo?.num_traces ?? 0);
    this.scroller.scrollTop = 0;
    this.map = new ScrollMap(0, ROW_HEIGHT, 0);
    this.relayout();
  }

  /** A refresh of the runs list: the list grows with a live run, in whatever mode it is. */
  private async onRunsUpdate(): Promise<void> {
    const info = this.store.runInfo;
    const run = this.store.run;
    if (!info || run === null) return;
    const seq = this.modeSeq;
    let total = this.total;
    try {
      if (this.mode === "all") {
        total = info.num_traces;
        if (info.live && total > 0 && (info.circular_buffer_size ?? 0) > 0) {
          // A full circular buffer drops the oldest traces: positions shift while the count stays.
          const head = (await this.store.api.traces(run, 0, 1)).graph_executions[0];
          if (this.store.run !== run || seq !== this.modeSeq) return;
          if (head && this.firstIndex !== null && head.index !== this.firstIndex) this.pager.reset(total);
          this.firstIndex = head?.index ?? null;
        }
      } else if (info.live) {
        total = await this.countRows(run);
        if (this.store.run !== run || seq !== this.modeSeq) return;
      }
    } catch (err) {
      this.store.reportError(err);
      return;
    }
    if (total !== this.pager.total) {
      this.pager.grow(total);
      this.relayout();
      // The paused call's rows follow the recorded ones, which just grew: keep the selection in view.
      if (this.store.pausedRow !== null) this.revealSelection();
    } else this.render();
  }

  /** The ops the filter's text finds (graphs/search: by name, kernel, op type, line), the
   * one to list when it names a single op; several are chips to pick from. */
  private async updateFilter(): Promise<void> {
    const text = this.filterInput.value.trim();
    const run = this.store.run;
    const seq = ++this.filterSeq;
    let matches: SearchAnswer["matches"] = [];
    let total = 0;
    if (text && run !== null) {
      try {
        const found = await this.store.api.search(run, text, FILTER_CHIPS);
        matches = found.matches;
        total = found.num_matches;
      } catch (err) {
        this.store.reportError(err);
      }
    }
    if (seq !== this.filterSeq || this.filterInput.value.trim() !== text) return;
    const ops = matches.map((m) => m.op);
    const sameName = ops.filter((op) => op.op_name === text);
    // The same var name in several functions is ambiguous: the user picks one (a chip).
    const exact =
      this.pinned && this.pinned.op_name === text ? this.pinned : sameName.length === 1 ? sameName[0] : total === 1 ? ops[0] : null;
    const several = new Set(matches.map((m) => m.graph_name)).size > 1;
    const label = (m: SearchAnswer["matches"][number]) => (several ? `${m.op.op_name} · ${m.graph_name}` : m.op.op_name);
    this.showFilterAnswer(
      text,
      text && !total ? h("span", { class: "muted", "data-testid": "filter-no-match" }, `no op matches “${text}”`) : null,
      total > 1
        ? [
            h("span", { class: "muted" }, `${formatCount(total)} ops match${exact ? "" : ", pick one"}: `),
            matches.map((m) =>
              h(
                "button",
                {
                  class: `chip${exact?.op_id === m.op.op_id ? " active" : ""}`,
                  "data-op-id": String(m.op.op_id),
                  title: m.why,
                  onclick: () => {
                    this.filterInput.value = m.op.op_name;
                    this.pinned = m.op;
                    void this.updateFilter();
                  },
                },
                label(m),
              ),
            ),
          ]
        : null,
    );
    // No text: every execution. A match: that op's. Text that names no single op: nothing
    // (never the whole list under a filter the user can see).
    await this.setMode(!text ? "all" : exact ? "op" : "none", exact);
  }

  /** Shows what the filter found for `text`. data-query names the text the chips answer
   * (aria-busy: a search for newer text is out), so that nothing acts on an older answer. */
  private showFilterAnswer(text: string, ...children: Child[]): void {
    setChildren(this.filterInfo, ...children);
    this.filterInfo.dataset.query = text;
    this.filterInfo.removeAttribute("aria-busy");
  }

  /** Empties the filter: its text, its chips, the op picked among them, and any search still
   * out (its answer would be for text no longer there). */
  private clearFilter(): void {
    this.filterInput.value = "";
    this.pinned = null;
    this.filterSeq += 1;
    this.showFilterAnswer("");
  }

  /** Lists only the non-finite outputs (the run's alerts, counted over all of them), or all. */
  private async setNonfiniteOnly(on: boolean): Promise<void> {
    if (on) this.clearFilter();
    await this.setMode(on ? "nonfinite" : "all", null);
  }

  private async setMode(mode: ListMode, op: Op | null): Promise<void> {
    if (mode === this.mode && op?.op_id === this.filterOp?.op_id) return;
    const seq = ++this.modeSeq;
    this.mode = mode;
    this.filterOp = mode === "op" ? op : null;
    this.nonfiniteBox.checked = mode === "nonfinite";
    this.sayGoto("");
    // Nothing from the previous list shows while the new one is counted.
    this.pager.reset(0);
    this.scroller.scrollTop = 0;
    this.map = new ScrollMap(0, ROW_HEIGHT, 0);
    this.relayout();
    const run = this.store.run;
    let total = 0;
    if (run !== null) {
      try {
        total = await this.countRows(run);
      } catch (err) {
        this.store.reportError(err);
      }
    }
    if (seq !== this.modeSeq || this.store.run !== run) return;
    this.pager.reset(total);
    this.relayout();
    this.revealSelection();
  }

  private sayGoto(text: string): void {
    this.gotoInput.classList.toggle("invalid", !!text);
    this.gotoInput.setAttribute("aria-invalid", String(!!text));
    setChildren(this.gotoMessage, text);
  }

  /** Scrolls to a row of the current list and selects it; says why when the text is not a row. */
  async goTo(text: string): Promise<void> {
    const row = parseIndex(text, this.total);
    if (row === null) {
      const what = this.mode === "all" ? "kernel execution" : "row";
      this.sayGoto(
        this.total === 0
          ? "the list is empty"
          : `“${text.trim().slice(0, 20)}” is not a ${what} number: give a whole number from 0 to ${formatCount(this.total - 1)}`,
      );
      return;
    }
    this.sayGoto("");
    await this.selectRow(row);
  }

  /** Scrolls to a row of the list (a recorded one, or one of the paused call) and selects it. */
  private async selectRow(row: number): Promise<void> {
    this.scrollToRow(row);
    if (row >= this.total) {
      const k = row - this.total;
      await this.paused.ensure(k, k + 1).catch((err) => this.store.reportError(err));
      const t = this.paused.get(k);
      if (t) void this.store.selectPausedTrace(t.call_position, t.op_id);
      return;
    }
    await this.pager.ensure(row, row + 1).catch((err) => this.store.reportError(err));
    const trace = this.pager.get(row);
    if (trace) void this.store.selectTrace(trace.position, trace.index);
  }

  private scrollToRow(row: number): void {
    if (!this.map.isFullyVisible(row, this.scroller.scrollTop)) this.scroller.scrollTop = this.map.scrollTopFor(row, "center");
    this.render();
  }

  private onSelection(): void {
    if (this.store.pausedRow !== null && this.mode !== "all") {
      // The paused kernel is listed with its call's rows, after the recorded ones: the whole list.
      this.clearFilter();
      void this.setMode("all", null);
      return;
    }
    const trace = this.store.trace;
    if (this.mode === "op" && trace && trace.op_id !== this.filterOp?.op_id) {
      // Another op was selected elsewhere: the filter no longer fits it, the whole list does.
      this.clearFilter();
      void this.setMode("all", null);
      return;
    }
    this.revealSelection();
  }

  /** Brings the selected kernel execution's row into view, in whatever the list shows. */
  private revealSelection(): void {
    const pausedRow = this.store.pausedRow;
    if (pausedRow !== null && pausedRow < this.pausedShown) return this.scrollToRow(this.total + pausedRow);
    const pos = this.store.tracePosition;
    if (pos === null) return this.render();
    if (this.mode === "all") return this.scrollToRow(pos);
    const row = this.rowOfSelection();
    if (row !== null) return this.scrollToRow(row);
    this.render();
    const trace = this.store.trace;
    if (this.mode === "op" && trace && trace.op_id === this.filterOp?.op_id) void this.findRow(trace);
  }

  /** The row of `trace` in an op's list: its executions are in order, so it is found by a
   * binary search over the pages (a few requests even for a long run). */
  private async findRow(trace: TraceData): Promise<void> {
    let lo = 0;
    let hi = this.total - 1;
    const seq = this.modeSeq;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      await this.pager.ensure(mid, mid + 1).catch(() => undefined);
      const row = this.pager.get(mid);
      if (seq !== this.modeSeq || this.store.trace !== trace || !row) return;
      if (row.index === trace.index) return this.scrollToRow(mid);
      if (row.index < trace.index) lo = mid + 1;
      else hi = mid - 1;
    }
  }

  private onKey(e: KeyboardEvent): void {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    e.preventDefault();
    const current = this.rowOfSelection() ?? -1;
    const next = Math.min(this.rowCount - 1, Math.max(0, current + (e.key === "ArrowDown" ? 1 : -1)));
    if (next >= 0) void this.selectRow(next);
  }

  /** Row of the selected trace in the current list, when it is known. */
  private rowOfSelection(): number | null {
    const pausedRow = this.store.pausedRow;
    if (pausedRow !== null) return pausedRow < this.pausedShown ? this.total + pausedRow : null;
    const pos = this.store.tracePosition;
    if (pos === null) return null;
    if (this.mode === "all") return pos;
    const index = this.store.trace?.index;
    for (const i of this.pager.cachedRows()) {
      const t = this.pager.get(i);
      if (t && (index !== undefined ? t.index === index : t.position === pos)) return i;
    }
    return null;
  }

  /** The viewport changed (the window or a pane resized): a selected row that was in view
   * stays in view (a smaller list would otherwise hide it below its bottom edge). */
  private onResize(): void {
    const row = this.rowOfSelection();
    // In view before, even in part (a list a few rows high shows half a row): in view after.
    const top = row === null ? 0 : row * ROW_HEIGHT - this.map.contentTopFor(this.scroller.scrollTop);
    const shown = row !== null && top > -ROW_HEIGHT && top < this.map.viewportHeight;
    this.relayout();
    if (shown) this.scrollToRow(row);
  }

  /** Rebuilds the scroll mapping after the row count or the viewport changed, keeping the rows
   * in view where they were (at scale, the same scrollTop would show other rows). */
  private relayout(): void {
    const contentTop = this.map.contentTopFor(this.scroller.scrollTop);
    this.map = new ScrollMap(this.rowCount, ROW_HEIGHT, this.scroller.clientHeight);
    // The sticky window takes one viewport of the scroll height; the spacer adds the rest.
    this.spacer.style.height = `${Math.max(0, this.map.spacerHeight - this.scroller.clientHeight)}px`;
    const scrollTop = this.map.scrollTopForContent(contentTop);
    if (Math.abs(scrollTop - this.scroller.scrollTop) >= 1) this.scroller.scrollTop = scrollTop;
    this.countEl.textContent =
      this.mode === "op" && this.filterOp
        ? `${plural(this.total, "execution")} of ${this.filterOp.op_name}`
        : this.mode === "nonfinite"
          ? `${plural(this.total, "non-finite kernel execution")}`
          : this.mode === "none"
            ? "no match"
            : plural(this.total, "kernel execution") + (this.pausedShown ? ` + ${formatCount(this.pausedShown)} of the paused call` : "");
    this.countEl.title = this.countEl.textContent;
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
    let toLoad = false;
    let pausedToLoad = false;
    for (let i = w.first; i < w.end; i++) {
      const top = w.offsetPx + (i - w.first) * ROW_HEIGHT;
      if (i >= this.total) {
        const p = this.paused.get(i - this.total);
        if (!p && !this.paused.hasPage(i - this.total)) pausedToLoad = true;
        rows.push(this.pausedRowEl(i, top, p));
        continue;
      }
      const t = this.pager.get(i);
      if (!t) {
        // A row of a page being fetched shows "loading…"; a page that came back short (the
        // list shrank: a circular buffer, a live count ahead of the data) shows the gap and
        // is not asked again until the next refresh, so nothing loops.
        const loaded = this.pager.hasPage(i);
        if (!loaded) toLoad = true;
        rows.push(
          h(
            "div",
            { class: "vlist-row loading", style: { top: `${top}px` } },
            h("span", { class: "c-idx" }, String(i)),
            h("span", { class: "muted" }, loaded ? "not in the dump any more" : "loading…"),
          ),
        );
        continue;
      }
      // By monotonic index once the selection is loaded: positions shift in a circular buffer.
      const selected = this.store.trace ? t.index === this.store.trace.index : t.position === this.store.tracePosition;
      const health = healthOf(t);
      const tensor = t.dtype ? `${t.dtype} ${formatShape(t.shape)}` : "";
      rows.push(
        h(
          "div",
          {
            class: `vlist-row${selected ? " selected" : ""}${t.nonfinite ? " nonfinite" : ""}${t.has_error ? " errored" : ""}`,
            style: { top: `${top}px` },
            "data-row": String(i),
            "data-position": String(t.position),
            "data-op-name": t.op_name,
            "aria-selected": String(selected),
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
          h("span", { class: "c-tensor", title: t.dtype ? `${tensor} (rank ${t.shape.length})` : "" }, tensor),
          h(
            "span",
            { class: "c-health" },
            t.has_error ? h("span", { class: "error-text", title: t.error }, "error") : healthPill(health, true),
          ),
        ),
      );
    }
    setChildren(this.windowEl, rows);
    if (this.rowCount === 0)
      setChildren(
        this.windowEl,
        h(
          "div",
          { class: "empty" },
          this.mode === "op"
            ? "This op has no recorded executions."
            : this.mode === "nonfinite"
              ? "No non-finite output recorded."
              : this.mode === "none"
                ? "No op matches the filter."
                : "No kernel executions recorded yet.",
        ),
      );
    if (toLoad) {
      const run = this.store.run;
      this.pager
        .ensure(w.first, Math.min(w.end, this.total))
        .then(() => {
          if (this.store.run === run) this.schedule();
        })
        .catch((err) => this.store.reportError(err));
    }
    if (pausedToLoad) {
      const pause = this.store.pause;
      this.paused
        .ensure(Math.max(0, w.first - this.total), w.end - this.total)
        .then(() => {
          // By id: the Live panel's poll reads the same pause again as a new object.
          if (this.store.pause?.pauseId === pause?.pauseId) this.schedule();
        })
        .catch((err) => this.store.reportError(err));
    }
  }

  /** A row of the paused call: a kernel that ran, listed before the dump holds it. */
  private pausedRowEl(i: number, top: number, t: PausedTrace | undefined): HTMLElement {
    if (!t)
      return h(
        "div",
        { class: "vlist-row loading in-progress", style: { top: `${top}px` } },
        h("span", { class: "c-idx" }, String(i)),
        h("span", { class: "muted" }, this.paused.hasPage(i - this.total) ? "the program moved on" : "loading…"),
      );
    const selected = this.store.pausedRow === t.call_position;
    const tensor = t.dtype ? `${t.dtype} ${formatShape(t.shape)}` : "";
    return h(
      "div",
      {
        class: `vlist-row in-progress${selected ? " selected" : ""}${t.nonfinite ? " nonfinite" : ""}${t.has_error ? " errored" : ""}`,
        style: { top: `${top}px` },
        title: "in the paused call: the dump holds it once the call returns",
        "data-row": String(i),
        "data-call-position": String(t.call_position),
        "data-op-name": t.op_name,
        "data-testid": "paused-trace",
        "aria-selected": String(selected),
        onclick: () => void this.store.selectPausedTrace(t.call_position, t.op_id),
      },
      h("span", { class: "c-idx" }, String(i)),
      h("span", { class: "c-op", title: t.op_name }, t.op_name, t.output_slot ? h("span", { class: "muted" }, `:${t.output_slot}`) : null),
      h("span", { class: "c-kernel", title: t.kernel }, t.kernel),
      h("span", { class: "c-exec muted" }, String(t.execution_index)),
      h("span", { class: "c-tensor", title: t.dtype ? `${tensor} (rank ${t.shape.length})` : "" }, tensor),
      h(
        "span",
        { class: "c-health" },
        t.has_error ? h("span", { class: "error-text", title: t.error }, "error") : healthPill(healthOf(t), true),
      ),
    );
  }
}

/** A list row for an alert (a non-finite output): its counts, place, and its output's dtype
 * and shape as compiled (-1 dimensions show as "?"). */
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
    dtype: a.dtype ?? "",
    shape: a.shape ?? [],
    device: "",
    error: "",
    has_value: false,
  };
}
