/** Execution timeline: the top-level VM function calls in order, paged, with alert markers;
 * a click shows the call's details and the kernels it ran. */
import type { ExecutionData, ExecutionDigest, TraceData } from "../api";
import { h, scrollWithin, setChildren } from "../dom";
import { formatClock, formatCount, formatDuration, formatLocation, formatShape, stepText, summaryHealth } from "../format";
import type { PauseInfo, Store } from "../store";
import { keepFocus, roving, setTabStop } from "../roving";
import { healthPill } from "./pill";

const PAGE = 100;

export class TimelinePanel {
  readonly el: HTMLElement;
  private readonly strip: HTMLElement;
  private readonly nav: HTMLElement;
  private readonly details: HTMLElement;
  private begin = 0;
  private digests: ExecutionDigest[] = [];
  private total = 0;
  private asking: { key: string; page: ReturnType<Store["api"]["executionDigests"]> } | null = null;
  /** Follow the newest page while the run grows, until the user pages back. */
  private followTail = true;
  private seq = 0;
  /** Whether this run's timeline was already opened on its first bad call (once per run). */
  private openedOnFirstBad = false;

  constructor(private readonly store: Store) {
    this.strip = h("div", {
      class: "timeline-strip",
      role: "listbox",
      "aria-label": "calls (arrow keys move)",
      "aria-orientation": "horizontal",
      onkeydown: (e: KeyboardEvent) => this.onKey(e),
    });
    this.nav = h("div", { class: "timeline-nav" });
    this.details = h("div", { class: "execution-details" });
    const goTo = h("input", {
      class: "goto-call small",
      type: "search",
      "data-testid": "go-to-call",
      placeholder: "go to: decode 14, #30",
      "aria-label": "go to a call: a function and its step (decode 14), or #execution index",
      onkeydown: (event: KeyboardEvent) => {
        if (event.key === "Enter") void this.goTo((event.target as HTMLInputElement).value);
      },
    });
    this.el = h(
      "section",
      { class: "panel timeline-panel", "data-panel": "timeline" },
      h("header", { class: "panel-head" }, h("h2", null, "Execution timeline"), this.nav, goTo),
      this.strip,
      this.details,
    );
    store.on("run", () => {
      this.begin = 0;
      this.followTail = true;
      this.openedOnFirstBad = false;
      this.digests = [];
      setChildren(this.details, h("div", { class: "muted small" }, "Click a call to see its inputs, outputs and the kernels it ran."));
      void this.load();
    });
    store.on("runs", () => {
      // A live run may also shift positions (circular buffer) without changing the count.
      if ((this.store.runInfo?.num_executions ?? 0) !== this.total || this.store.runInfo?.live) void this.load();
    });
    store.on("trace", () => void this.syncToTrace());
    store.on("alerts", () => (this.openOnFirstBad() ? undefined : this.render()));
    store.on("execution", () => void this.showExecution());
    store.on("pause", () => this.onPause());
  }

  /** A live pause: its call (not in the dump until it returns) is shown after the recorded
   * ones and selected, with the kernels it ran so far. */
  private onPause(): void {
    const p = this.store.pause;
    if (p) {
      if (this.followTail || this.begin + PAGE >= this.total) this.page(Math.max(0, this.total - 1));
      this.store.selectExecution(-1, p.executionIndex);
    } else this.render();
  }

  /** The selected call (the strip's Tab stop), for the keyboard's jump to this panel. */
  focusTarget(): HTMLElement | null {
    return this.strip.querySelector<HTMLElement>(".tl-item[tabindex='0']");
  }

  /** Arrow keys move through the calls (one tab stop for the whole strip). */
  private onKey(e: KeyboardEvent): void {
    const items = [...this.strip.querySelectorAll<HTMLElement>(".tl-item")];
    if (!items.length) return;
    const at = Math.max(0, items.indexOf(document.activeElement as HTMLElement));
    let next = at;
    if (e.key === "ArrowRight") next = Math.min(items.length - 1, at + 1);
    else if (e.key === "ArrowLeft") next = Math.max(0, at - 1);
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = items.length - 1;
    else return;
    e.preventDefault();
    items[next].focus();
    items[next].click();
  }

  private async load(): Promise<void> {
    const run = this.store.run;
    const total = this.store.runInfo?.num_executions ?? 0;
    this.total = total;
    // The count shows at once, in the same task as the header's, so the two never disagree.
    this.render();
    if (run === null) return;
    if (this.followTail) this.begin = Math.max(0, Math.floor(Math.max(0, total - 1) / PAGE) * PAGE);
    try {
      // The same page of the same state of the run is asked once at a time (a new run, its
      // alerts and the runs poll each ask for it at load).
      const key = `${run}|${this.begin}|${total}`;
      if (this.asking?.key !== key) this.asking = { key, page: this.store.api.executionDigests(run, this.begin, this.begin + PAGE) };
      const asked = this.asking;
      const page = await asked.page.finally(() => {
        if (this.asking === asked) this.asking = null;
      });
      if (this.store.run !== run) return;
      // One snapshot for every panel: the count is the runs poll's (what the header shows),
      // even when the route, asked later, already sees calls a live program wrote since.
      const snapshot = this.store.runInfo?.num_executions ?? page.num_digests;
      this.total = Math.min(page.num_digests, snapshot);
      this.digests = page.execution_digests.filter((d) => d.position < this.total);
    } catch (err) {
      this.store.reportError(err);
    }
    this.render();
  }

  /** A run with alerts opens on its first bad call (the first origin alert's execution), not on
   * the newest page, unless the user already picked a call. Returns whether it did. */
  private openOnFirstBad(): boolean {
    const fb = this.store.firstBad;
    if (this.openedOnFirstBad || !fb || fb.executionPosition === null || this.store.executionIndex !== null) return false;
    this.openedOnFirstBad = true;
    const position = fb.executionPosition;
    const run = this.store.run;
    const select = () => {
      if (this.store.run !== run || this.store.executionIndex !== null) return;
      const d = this.digests.find((x) => x.index === fb.executionIndex);
      if (d) this.store.selectExecution(d.position, d.index);
    };
    const begin = position - (position % PAGE);
    if (begin === this.begin && this.digests.some((x) => x.index === fb.executionIndex)) {
      select(); // the page shown holds it: no need to ask for it again
      return true;
    }
    this.begin = begin;
    this.followTail = this.begin + PAGE >= this.total;
    void this.load().then(select);
    return true;
  }

  private page(begin: number): void {
    this.begin = Math.max(0, Math.min(begin, Math.max(0, this.total - 1)));
    this.begin -= this.begin % PAGE;
    this.followTail = this.begin + PAGE >= this.total;
    void this.load();
  }

  /** "decode 14" (or "decode · step 14"): that function's call of that step; "#30" (or "30"):
   * the call with that execution index. Every panel moves to it (store.selectCall). */
  private async goTo(text: string): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    const byIndex = /^\s*#?(\d+)\s*$/.exec(text);
    const byStep = /^\s*([\w.$-]+)\s*(?:·\s*)?(?:step\s*)?(\d+)\s*$/.exec(text);
    try {
      let found: { position: number; index: number } | null | undefined;
      if (byIndex) found = await this.store.executionByIndex(Number(byIndex[1]));
      else if (byStep) {
        const find = { function: byStep[1], call: Number(byStep[2]) };
        found = (await this.store.api.executionDigests(run, 0, 1, find)).execution_digests[0];
      }
      if (this.store.run !== run) return;
      if (!found) {
        const what = byStep ? `${byStep[1]} · step ${byStep[2]}` : text.trim();
        setChildren(this.details, h("div", { class: "muted", "data-testid": "go-to-miss" }, `No call ${what} in the dump.`));
        return;
      }
      await this.store.selectCall(found.position, found.index);
    } catch (err) {
      this.store.reportError(err);
    }
  }

  /** Shows the call a selected kernel execution ran in, paging the timeline to it. */
  private async syncToTrace(): Promise<void> {
    const t = this.store.trace;
    if (!t) return this.render();
    let d = this.digests.find((x) => x.index === t.execution_index);
    if (!d && this.digests.length) {
      // Kept executions have consecutive indices (the circular buffer drops the oldest), so
      // the position is the index minus the offset seen on this page; checked after loading.
      const offset = this.digests[0].index - this.digests[0].position;
      const position = t.execution_index - offset;
      if (position >= 0 && position < this.total) {
        this.begin = position - (position % PAGE);
        this.followTail = this.begin + PAGE >= this.total;
        await this.load();
        if (this.store.trace !== t) return;
        d = this.digests.find((x) => x.index === t.execution_index);
      }
    }
    if (d) {
      if (this.store.executionIndex !== d.index) this.store.selectExecution(d.position, d.index);
      else this.render();
    }
  }

  private render(): void {
    const last = Math.min(this.total, this.begin + PAGE);
    setChildren(
      this.nav,
      h(
        "button",
        { class: "small-btn", disabled: this.begin === 0, onclick: () => this.page(this.begin - PAGE), title: "older calls" },
        "‹",
      ),
      h(
        "span",
        { class: "muted small" },
        this.total ? `${formatCount(this.begin)}–${formatCount(last - 1)} of ${formatCount(this.total)} calls` : "no calls yet",
      ),
      h(
        "button",
        { class: "small-btn", disabled: last >= this.total, onclick: () => this.page(this.begin + PAGE), title: "newer calls" },
        "›",
      ),
    );
    const maxDur = Math.max(1, ...this.digests.map((d) => d.duration_us ?? 0));
    const pause = this.store.pause;
    // The paused call follows the last recorded one when that page is shown.
    const pausedHere = pause && last >= this.total && !this.digests.some((d) => d.index === pause.executionIndex);
    const focusable =
      this.digests.some((d) => d.index === this.store.executionIndex) || (pausedHere && this.store.executionIndex === pause.executionIndex);
    keepFocus(this.strip, () =>
      setChildren(
        this.strip,
        this.digests.map((d, i) => {
          const alerted = this.store.alertExecutions.has(d.index);
          const selected = d.index === this.store.executionIndex;
          return h(
            "button",
            {
              class: `tl-item${d.nonfinite ? " nonfinite" : ""}${alerted ? " alerted" : ""}${d.has_error ? " errored" : ""}${selected ? " selected" : ""}`,
              role: "option",
              "aria-selected": String(selected),
              // One tab stop for the strip (the selected call, else the first); arrows move.
              tabindex: selected || (!focusable && i === 0) ? "0" : "-1",
              title: `#${d.index} ${stepText(d.function_name, d.call_number)} · ${formatDuration(d.duration_us)} · ${d.num_traces} kernels${alerted ? " · NaN/∞ inside" : ""}${d.nonfinite ? " · NaN/∞ in outputs" : ""}${d.has_error ? " · raised" : ""}`,
              "data-index": String(d.index),
              "data-key": String(d.index),
              onclick: () => void this.store.selectCall(d.position, d.index),
            },
            h("span", { class: "tl-bar", style: { height: `${Math.max(12, Math.round((40 * (d.duration_us ?? 0)) / maxDur))}%` } }),
            h("span", { class: "tl-label" }, stepText(d.function_name, d.call_number)),
            alerted || d.nonfinite || d.has_error ? h("span", { class: "tl-marker", "aria-label": "alert" }, "!") : null,
          );
        }),
        pausedHere
          ? h(
              "button",
              {
                class: `tl-item paused${this.store.executionIndex === pause.executionIndex ? " selected" : ""}`,
                role: "option",
                "aria-selected": String(this.store.executionIndex === pause.executionIndex),
                tabindex: this.store.executionIndex === pause.executionIndex || !focusable ? "0" : "-1",
                title: `#${pause.executionIndex} ${pause.functionName} · paused at ${pause.opName} (running: written when it returns)`,
                "data-index": String(pause.executionIndex),
                "data-key": `paused${pause.executionIndex}`,
                "data-testid": "paused-call",
                onclick: () => this.store.selectExecution(-1, pause.executionIndex),
              },
              h("span", { class: "tl-bar paused-bar" }),
              h("span", { class: "tl-label" }, "‖ ", pause.functionName),
            )
          : null,
        this.digests.length || pausedHere ? null : h("div", { class: "empty" }, "No VM function call recorded yet."),
      ),
    );
    const selected = this.strip.querySelector<HTMLElement>(".tl-item.selected");
    if (selected) scrollWithin(this.strip, selected);
  }

  private async showExecution(): Promise<void> {
    this.render();
    const run = this.store.run;
    const pos = this.store.executionPosition;
    const index = this.store.executionIndex;
    if (run === null || pos === null || index === null) return;
    const seq = ++this.seq;
    const pause = this.store.pause;
    if (pause && pause.executionIndex === index && pos < 0) {
      try {
        const kernels = await this.store.api.traces(run, 0, 200, index);
        if (seq !== this.seq) return;
        this.renderPaused(pause, { rows: kernels.graph_executions, total: kernels.num_digests });
      } catch (err) {
        if (seq === this.seq) this.store.reportError(err);
      }
      return;
    }
    try {
      const [ex, kernels] = await Promise.all([this.executionAt(index), this.store.api.traces(run, 0, 200, index)]);
      if (seq !== this.seq) return;
      this.renderDetails(ex, { rows: kernels.graph_executions, total: kernels.num_digests });
    } catch (err) {
      if (seq !== this.seq) return;
      setChildren(this.details, h("div", { class: "error-box" }, err instanceof Error ? err.message : String(err)));
      this.store.reportError(err);
    }
  }

  /** The execution with monotonic `index` (the store's, cached: the op details read it too). */
  private async executionAt(index: number): Promise<ExecutionData> {
    const ex = await this.store.executionByIndex(index);
    if (!ex) throw new Error(`call #${index} is no longer in the dump (the circular buffer dropped it)`);
    return ex;
  }

  /** A paused call: what it ran so far (the dump holds its kernels once it returns). */
  private renderPaused(pause: PauseInfo, kernels: { rows: TraceData[]; total: number }): void {
    setChildren(
      this.details,
      h(
        "div",
        { class: "exec-head" },
        h("b", null, `#${pause.executionIndex} ${pause.functionName}`),
        h("span", { class: "muted" }, ` · paused after ${pause.opName} (${pause.kernel}) · ${pause.reason}`),
      ),
      h(
        "div",
        { class: "muted small" },
        kernels.rows.length
          ? "Kernels recorded so far:"
          : "Running: its kernels are written to the dump when the call returns; the Live panel shows the paused kernel's tensors.",
      ),
      this.kernelChips(kernels),
    );
  }

  /** The call's kernels, one row of chips (one Tab stop, arrow keys move), the selected one marked. */
  private kernelChips(kernels: { rows: TraceData[]; total: number }): HTMLElement {
    const selectedIndex = this.store.trace?.index;
    const chips = kernels.rows.map((t) =>
      h(
        "button",
        {
          class: `kchip${t.nonfinite ? " nonfinite" : ""}${t.index === selectedIndex ? " selected" : ""}`,
          title: `${t.kernel} · ${formatDuration(t.duration_us)}`,
          "data-key": String(t.index),
          onclick: () => void this.store.selectTrace(t.position, t.index),
        },
        t.op_name,
      ),
    );
    setTabStop(chips, chips.find((c) => c.classList.contains("selected")) ?? null);
    const row = h(
      "div",
      { class: "exec-kernels", role: "toolbar", "aria-label": "the call's kernels (arrow keys move)" },
      h("span", { class: "muted" }, "kernels"),
      chips,
      kernels.total > kernels.rows.length
        ? h("span", { class: "muted small" }, ` … ${formatCount(kernels.total - kernels.rows.length)} more`)
        : null,
    );
    roving(row, ".kchip", "horizontal");
    return row;
  }

  /** The call in three lines: what it is, its inputs' and outputs' health, its kernels. */
  private renderDetails(ex: ExecutionData, kernels: { rows: TraceData[]; total: number }): void {
    const summaries = (label: string, list: ExecutionData["inputs"]) => [
      h("span", { class: "muted" }, label),
      list.length
        ? list.map((s, i) =>
            h(
              "span",
              { class: "io-item", title: `${s.dtype} ${formatShape(s.shape)}` },
              `${i} `,
              Object.keys(s.summary).length ? healthPill(summaryHealth(s), true) : h("span", { class: "muted" }, formatShape(s.shape)),
            ),
          )
        : h("span", { class: "muted" }, "none"),
    ];
    const facts = `${formatClock(ex.wall_time)} · ${formatDuration(ex.duration_us)} · ${formatCount(ex.num_traces)} kernels · ${ex.tensor_debug_mode} · called at ${formatLocation(ex.location)}`;
    keepFocus(this.details, () =>
      setChildren(
        this.details,
        h(
          "div",
          { class: "exec-head", title: facts },
          h("b", null, `#${ex.index} ${ex.function_name}`),
          h("span", { class: "muted" }, ` · ${facts}`),
        ),
        ex.error ? h("div", { class: "error-box" }, `raised: ${ex.error}`) : null,
        h("div", { class: "io" }, summaries("inputs", ex.inputs), summaries("outputs", ex.outputs)),
        this.kernelChips(kernels),
      ),
    );
  }
}
