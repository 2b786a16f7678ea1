/**
 * Graph structure: the compiled function's kernels as nodes and tensors as edges, laid out with
 * dagre around the selection. The server walks the graph (graphs/neighborhood: bounded, nearest
 * first) so a function of any size costs the same; the selected op is framed, its inputs and
 * consumers highlighted and every node coloured by its health in the selected execution. A
 * fused kernel expands into the original Relax ops folded into it. "whole graph" lays out a
 * function of up to MAX_LAYOUT_OPS kernels; a larger one is shown folded (graph_overview.ts):
 * groups of consecutive kernels, a click opening a group. Zoomed out, labels keep a size one can
 * read (levels of detail): names are drawn at screen size and cut to their node's width.
 */
import dagre from "@dagrejs/dagre";
import type { Neighborhood as HoodAnswer, OpInfo, Overview, TraceData } from "../api";
import { h, setChildren, svg } from "../dom";
import {
  type Health,
  formatLocation,
  formatShapeExpr,
  hasLine,
  healthOf,
  healthText,
  isNonFinite,
  pillSegments,
  stepText,
  summaryHealth,
} from "../format";
import { type ShownOps, everything, nearer } from "../neighborhood";
import type { Store } from "../store";
import { drawOverview, type Range } from "./graph_overview";
import { type Drawn, type NodeBox, arrowDefs, truncate } from "./graph_svg";

const NODE_W = 204;
const NODE_H = 50;
const ORIG_ROW_H = 18;
const PARAM_W = 120;
const PARAM_H = 26;
/** Graphs up to this many ops are drawn whole; larger ones around the selection. */
const WHOLE_GRAPH_LIMIT = 60;
const NEIGHBORHOOD_OPS = 48;
const NEIGHBORHOOD_DEPTH = 4;
/** Never lay out more than this many ops at once: dagre's cost grows faster than linearly. A
 * larger function's "whole graph" is its folded overview. */
export const MAX_LAYOUT_OPS = 400;
/** Groups of a folded overview (each one node). */
export const OVERVIEW_GROUPS = 120;
/** Framing never zooms out below this: node text (12 px) stays >= 11 px on screen. When
 * the op with its inputs and consumers does not fit, the op and its inputs are framed and the
 * text list under the drawing carries the rest. */
export const MIN_LEGIBLE_SCALE = 0.92;
/** Margin around the framed op and its neighbours, in layout units. */
const FRAME_PAD = 14;
/** On-screen size of the labels drawn when zoomed out (levels of detail), in px. */
const LOD_FONT_PX = 11.5;
/** Width of a character of a 11.5 px label, in px (to cut a name to its node's width). */
const LOD_CHAR_PX = 7;

/** An optional mark on an op node set by another view (the Compare view's verdicts): the node
 * gets class `mark-<cls>`, a small tag reading `tag` (a shape and palette of its own, never a
 * health colour) and the title line `title`; `legend` lists the tags under the drawing. */
export interface OpMark {
  cls: string;
  tag: string;
  title: string;
}

export interface MarkLegend {
  title: string;
  items: { cls: string; tag: string; label: string }[];
}

/** Results listed by the node search. */
const SEARCH_RESULTS = 30;
/** Typing pauses this long before the node search asks the server. */
const SEARCH_DELAY_MS = 120;

export class GraphPanel {
  readonly el: HTMLElement;
  private readonly title: HTMLElement;
  private readonly canvas: HTMLElement;
  private readonly legend: HTMLElement;
  /** Text list of the selected op's inputs and consumers: always readable, whatever the zoom. */
  private readonly links: HTMLElement;
  /** What the drawing shows (the call, how many kernels of how many), under it. */
  private readonly note: HTMLElement;
  private readonly enlargeBtn: HTMLButtonElement;
  private readonly searchInput: HTMLInputElement;
  private readonly searchResults: HTMLElement;
  private matches: { op: { op_id: number; op_name: string; kernel: string }; graph_name: string; why: string }[] = [];
  private searchTimer = 0;
  private searchSeq = 0;
  private expanded = new Set<number>();
  /** What the drawing shows: the layout point at the canvas's centre and the zoom (screen px
   * per layout unit). The viewBox follows the canvas's size, so resizing a pane never
   * stretches the drawing or shrinks its text. */
  private view = { cx: 0, cy: 0, scale: 1 };
  /** The view that frames the selected op, restored by "zoom to selection" after panning. */
  private home = { cx: 0, cy: 0, scale: 1 };
  /** The bounding box of everything drawn, for "fit". */
  private extent = { x: 0, y: 0, w: 100, h: 100 };
  private svgEl: SVGSVGElement | null = null;
  private seq = 0;
  private wholeGraph = false;
  /** The folded overview's levels: the ranges of ops opened, outermost first. */
  private levels: Range[] = [];
  private readonly wholeBox: HTMLInputElement;
  private marks: { run: string; ops: Map<number, OpMark>; legend: MarkLegend | null } | null = null;
  private drawnSize = { w: 0, h: 0 };
  private resizeTimer = 0;
  private lodTimer = 0;
  /** The last neighbourhood fetched (a re-render for an expanded node or a resize reuses it). */
  private hood: { key: string; answer: Promise<HoodAnswer> } | null = null;

  constructor(private readonly store: Store) {
    this.title = h("span", { class: "muted graph-title" });
    this.canvas = h("div", { class: "graph-canvas" });
    this.legend = h("div", { class: "graph-legend small" });
    this.wholeBox = h("input", {
      type: "checkbox",
      "data-testid": "whole-graph",
      onchange: (e: Event) => {
        this.wholeGraph = (e.target as HTMLInputElement).checked;
        this.levels = [];
        void this.render();
      },
    });
    const whole = h(
      "label",
      {
        class: "small whole-graph",
        title: `lay out the whole function (up to ${MAX_LAYOUT_OPS} kernels; a larger one folded into groups), fitted`,
      },
      this.wholeBox,
      " whole",
    );
    this.links = h("div", { class: "graph-links small", "data-testid": "graph-links" });
    this.note = h("span", { class: "graph-note muted small", "data-testid": "graph-note", hidden: true });
    this.enlargeBtn = h(
      "button",
      {
        class: "small-btn",
        "data-testid": "graph-enlarge",
        title: "show the graph over the whole page (Esc closes)",
        onclick: () => this.setEnlarged(!this.enlarged),
        "aria-label": "enlarge the graph",
      },
      "⤢",
    );
    this.searchResults = h("ul", { class: "graph-search-results", role: "listbox", hidden: true, "data-testid": "graph-search-results" });
    this.searchInput = h("input", {
      type: "search",
      class: "graph-search",
      placeholder: "find node: name, kernel, op type, file:line",
      "aria-label": "find a node by op name, kernel, Relax op type or source line",
      "data-testid": "graph-search",
      oninput: () => this.searchSoon(),
      onkeydown: (e: KeyboardEvent) => this.searchKey(e),
      onblur: () => setTimeout(() => (this.searchResults.hidden = true), 150),
      onfocus: () => this.searchSoon(),
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.enlarged) this.setEnlarged(false);
    });
    const tool = (label: string, title: string, testid: string, fn: () => void) =>
      h("button", { class: "small-btn tool-btn", title, "aria-label": title, "data-testid": testid, onclick: fn }, label);
    this.enlargeBtn.classList.add("tool-btn");
    // One row of tools above the drawing and one of text below it: the canvas gets the rest.
    this.el = h(
      "section",
      { class: "panel graph-panel", "data-panel": "graph" },
      h(
        "header",
        { class: "panel-head graph-head" },
        h("h2", null, "Graph"),
        this.title,
        h("span", { class: "graph-search-box" }, this.searchInput, this.searchResults),
        h(
          "span",
          { class: "graph-tools" },
          tool("◎", "zoom to the selected op with its inputs and consumers", "graph-zoom-selection", () => this.zoomToSelection()),
          tool("fit", "fit everything drawn into the panel", "graph-fit", () => this.fit()),
          tool("+", "zoom in", "graph-zoom-in", () => this.zoom(1.25)),
          tool("−", "zoom out", "graph-zoom-out", () => this.zoom(1 / 1.25)),
          whole,
          this.enlargeBtn,
        ),
      ),
      this.canvas,
      h("div", { class: "graph-foot" }, this.links, h("div", { class: "graph-foot-row" }, this.legend, this.note)),
    );
    new ResizeObserver(() => this.onResize()).observe(this.canvas);
    this.canvas.addEventListener("keydown", (e) => this.nodeKey(e));
    store.on("run", () => {
      this.expanded.clear();
      this.hood = null;
      this.levels = [];
      this.wholeGraph = this.wholeBox.checked = false; // per-run state starts afresh
      this.searchInput.value = "";
      this.searchResults.hidden = true;
      void this.render();
    });
    store.on("op", () => void this.render());
    store.on("pause", () => void this.render());
    this.renderLegend();
  }

  /** The selected node (the drawing's Tab stop), for the keyboard's jump to this panel. */
  focusTarget(): HTMLElement | null {
    return this.canvas.querySelector<HTMLElement>(".node[tabindex='0']") ?? this.searchInput;
  }

  /** Arrow keys move the focus to the nearest node in that direction (panning to it when it
   * is out of view); Enter on a node selects it. */
  private nodeKey(e: KeyboardEvent): void {
    const way = ({ ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] } as Record<string, number[]>)[e.key];
    const from = document.activeElement as SVGGElement | null;
    if (!way || !from?.classList.contains("node") || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    const centre = (el: Element) => {
      const r = el.getBoundingClientRect();
      return [r.x + r.width / 2, r.y + r.height / 2];
    };
    const [x0, y0] = centre(from);
    let best: SVGGElement | null = null;
    let bestScore = Infinity;
    for (const node of this.canvas.querySelectorAll<SVGGElement>(".op-node, .group-node")) {
      if (node === from) continue;
      const [x, y] = centre(node);
      const along = (x - x0) * way[0] + (y - y0) * way[1];
      if (along <= 1) continue;
      const score = along + 2 * Math.abs((x - x0) * way[1] - (y - y0) * way[0]);
      if (score < bestScore) [best, bestScore] = [node, score];
    }
    if (!best) return;
    for (const node of this.canvas.querySelectorAll<SVGGElement>(".node")) node.setAttribute("tabindex", node === best ? "0" : "-1");
    const box = best.getBoundingClientRect();
    const area = this.canvas.getBoundingClientRect();
    if (box.left < area.left || box.right > area.right || box.top < area.top || box.bottom > area.bottom) {
      this.view = { ...this.view, cx: Number(best.dataset.cx), cy: Number(best.dataset.cy) };
      this.applyView();
    }
    best.focus({ preventScroll: true });
  }

  /** The drawing is framed again when the pane changes size (a gutter dragged, the window
   * resized): the selection stays in view. */
  private onResize(): void {
    this.applyView(); // at once, before the next paint: same zoom, same centre
    const w = this.canvas.clientWidth;
    const hgt = this.canvas.clientHeight;
    if (!this.svgEl || (Math.abs(w - this.drawnSize.w) < 40 && Math.abs(hgt - this.drawnSize.h) < 40)) return;
    // A pane resized a lot: framed again (more or fewer neighbours may fit now).
    clearTimeout(this.resizeTimer);
    this.resizeTimer = window.setTimeout(() => void this.render(), 200);
  }

  private searchSoon(): void {
    clearTimeout(this.searchTimer);
    this.searchTimer = window.setTimeout(() => void this.search(), SEARCH_DELAY_MS);
  }

  /** The ops the text finds (graphs/search), as a list under the box; the text stays as typed. */
  private async search(): Promise<void> {
    const query = this.searchInput.value;
    const run = this.store.run;
    const seq = ++this.searchSeq;
    if (!query.trim() || run === null) {
      this.matches = [];
      this.searchResults.hidden = true;
      return;
    }
    let total = 0;
    try {
      const found = await this.store.api.search(run, query, SEARCH_RESULTS);
      if (seq !== this.searchSeq || this.searchInput.value !== query) return;
      this.matches = found.matches;
      total = found.num_matches;
    } catch (err) {
      this.store.reportError(err);
      return;
    }
    const several = new Set(this.matches.map((m) => m.graph_name)).size > 1;
    setChildren(
      this.searchResults,
      this.matches.length
        ? this.matches.map((m, i) =>
            h(
              "li",
              {
                role: "option",
                class: `graph-search-result${i === 0 ? " active" : ""}`,
                "data-op-id": String(m.op.op_id),
                // mousedown: picked before the input's blur hides the list
                onmousedown: (e: Event) => {
                  e.preventDefault();
                  this.pick(m);
                },
              },
              h("b", null, m.op.op_name),
              h("span", { class: "muted" }, ` ${m.op.kernel}${several ? ` · ${m.graph_name}` : ""} · ${m.why}`),
            ),
          )
        : h("li", { class: "muted graph-search-none" }, `no node matches “${query.trim()}”`),
      total > this.matches.length
        ? h("li", { class: "muted graph-search-none" }, `… ${total - this.matches.length} more: type more`)
        : null,
    );
    this.searchResults.hidden = false;
  }

  private searchKey(e: KeyboardEvent): void {
    const items = [...this.searchResults.querySelectorAll<HTMLElement>(".graph-search-result")];
    const at = items.findIndex((x) => x.classList.contains("active"));
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (!items.length) return;
      const next = e.key === "ArrowDown" ? Math.min(items.length - 1, at + 1) : Math.max(0, at - 1);
      items.forEach((x, i) => x.classList.toggle("active", i === next));
      items[next].scrollIntoView({ block: "nearest" });
    } else if (e.key === "Enter") {
      e.preventDefault();
      const m = this.matches[Math.max(0, at)];
      if (m) this.pick(m);
    } else if (e.key === "Escape") {
      this.searchResults.hidden = true;
    }
  }

  /** A search result: selected through the one navigation model (every panel follows: its call
   * in the timeline, its row, its source) and framed here. What was typed stays in the box. */
  private pick(m: { op: { op_id: number } }): void {
    this.searchResults.hidden = true;
    void this.store.goToOp(m.op.op_id);
  }

  /** Marks op nodes of `run` until replaced (null clears): shown whenever that run is drawn,
   * with their legend under the drawing. */
  setMarks(run: string | null, ops: Map<number, OpMark> = new Map(), legend: MarkLegend | null = null): void {
    this.marks = run === null ? null : { run, ops, legend };
    this.renderLegend();
    void this.render();
  }

  /** The health legend, and the marks' own legend while the drawn run has marks. */
  private renderLegend(): void {
    const legend = this.marks && this.marks.run === this.store.run ? this.marks.legend : null;
    setChildren(
      this.legend,
      h("span", { class: "lg lg-selected" }, "selected"),
      h("span", { class: "lg lg-input" }, "input"),
      h("span", { class: "lg lg-consumer" }, "consumer"),
      h("span", { class: "lg lg-bad", title: "an output holds NaN or ∞ in this call" }, "NaN/∞"),
      h("span", { class: "lg lg-ok" }, "finite"),
      this.store.pause ? h("span", { class: "lg-tag" }, h("span", { class: "node-tag-sample tag-paused" }, "‖"), " paused here") : null,
      legend
        ? h(
            "span",
            { class: "mark-legend", "data-testid": "mark-legend" },
            h("span", { class: "muted" }, `${legend.title}: `),
            legend.items.map((it) =>
              h("span", { class: "lg-tag" }, h("span", { class: `node-tag-sample tag-${it.cls}` }, it.tag), ` ${it.label}`),
            ),
          )
        : null,
    );
  }

  private get enlarged(): boolean {
    return this.el.classList.contains("enlarged");
  }

  /** Full-page view of the graph (a larger drawing area), framed again for its new size. */
  private setEnlarged(on: boolean): void {
    this.el.classList.toggle("enlarged", on);
    this.enlargeBtn.textContent = on ? "close" : "⤢";
    this.enlargeBtn.setAttribute("aria-pressed", String(on));
    void this.render();
  }

  /** The neighbourhood of an op (in a call), fetched once for a selection: re-renders (a node
   * expanded, a resize) reuse it. */
  private neighborhood(run: string, opId: number, maxOps: number, executionIndex: number | undefined): Promise<HoodAnswer> {
    const key = `${run}|${opId}|${maxOps}|${executionIndex}`;
    if (this.hood?.key !== key) {
      const answer = this.store.api.neighborhood(run, opId, NEIGHBORHOOD_DEPTH, maxOps, executionIndex);
      answer.catch(() => {
        if (this.hood?.answer === answer) this.hood = null;
      });
      this.hood = { key, answer };
    }
    return this.hood.answer;
  }

  private async render(): Promise<void> {
    const seq = ++this.seq;
    const run = this.store.run;
    const op = this.store.op;
    this.renderLegend();
    if (run === null || !op) {
      this.title.textContent = "";
      this.svgEl = null;
      setChildren(this.links);
      return setChildren(this.canvas, h("div", { class: "empty" }, "Select a kernel execution or an alert to see its op in the graph."));
    }
    try {
      const trace = this.store.trace && this.store.trace.op_id === op.op_id ? this.store.trace : null;
      const call = trace?.execution_index;
      const total = (await this.store.graphs()).find((g) => g.graph_id === op.graph_id)?.num_ops ?? 0;
      if (seq !== this.seq) return;
      this.renderLinks(op);
      if (this.wholeGraph && total > MAX_LAYOUT_OPS) {
        const range = this.levels[this.levels.length - 1] ?? { begin: 0, end: total };
        const overview = await this.store.api.overview(run, op.graph_id, range.begin, range.end, OVERVIEW_GROUPS, call);
        if (seq !== this.seq) return;
        return this.showOverview(overview, op, total);
      }
      const maxOps = this.wholeGraph ? MAX_LAYOUT_OPS : WHOLE_GRAPH_LIMIT;
      const answer = await this.neighborhood(run, op.op_id, maxOps, call);
      if (seq !== this.seq) return;
      this.setTitle(`${answer.name} · ${answer.num_ops} kernels`);
      // The call as the CLI names it ("decode · step 14"; its index when its record is gone).
      const ex = trace ? await this.store.executionByIndex(trace.execution_index) : null;
      if (seq !== this.seq) return;
      this.setNote(ex ? stepText(ex.function_name, ex.call_number) : trace ? `call ${trace.execution_index}` : "");
      this.draw(answer, op);
    } catch (err) {
      if (seq !== this.seq) return;
      setChildren(this.canvas, h("div", { class: "error-box" }, err instanceof Error ? err.message : String(err)));
      this.store.reportError(err);
    }
  }

  private setTitle(text: string): void {
    this.title.textContent = text;
    this.title.title = text;
  }

  private setNote(text: string): void {
    this.note.textContent = text;
    this.note.title = text;
    this.note.hidden = !text;
  }

  /** A function too large to lay out, folded: groups of consecutive kernels, the selected op's
   * group marked; a click on a group opens it (the next level), "up" closes it. */
  private showOverview(overview: Overview, op: OpInfo, total: number): void {
    const path = this.levels.map((r) => `ops ${r.begin}–${r.end - 1}`).join(" › ");
    this.setTitle(`${overview.name} · ${total} kernels`);
    this.setNote(`folded: ${overview.groups.length} groups of ${overview.group_size}${path ? ` · ${path}` : ""}`);
    const drawn = drawOverview(overview, op, {
      open: (range) => {
        this.levels.push(range);
        void this.render();
      },
      select: (opId) => void this.store.goToOp(opId),
    });
    this.show(drawn, true);
    if (this.levels.length)
      this.canvas.appendChild(
        h(
          "button",
          {
            class: "small-btn graph-up",
            "data-testid": "graph-up",
            title: "back to the larger groups",
            onclick: () => {
              this.levels.pop();
              void this.render();
            },
          },
          "↑ up",
        ),
      );
  }

  /** Puts a drawing in the canvas, framed on its selection (or fitted). */
  private show(drawn: Drawn, fitted: boolean): void {
    this.drawnSize = { w: this.canvas.clientWidth, h: this.canvas.clientHeight };
    this.home = drawn.home;
    this.extent = drawn.extent;
    this.svgEl = drawn.root;
    if (fitted) this.fit();
    else this.zoomToSelection();
    this.enablePanZoom(drawn.root);
    // The keyboard stays in the drawing: after Enter on a node, on the node now selected.
    const hadFocus = this.canvas.contains(document.activeElement);
    setChildren(this.canvas, drawn.root);
    if (hadFocus) drawn.root.querySelector<SVGElement>(".node[tabindex='0']")?.focus({ preventScroll: true });
  }

  private draw(answer: HoodAnswer, selected: OpInfo): void {
    const byId = new Map(answer.ops.map((o) => [o.op_id, o]));
    const edges = answer.edges;
    const inputs = new Set(edges.filter((e) => e.dst_op_id === selected.op_id && e.src_op_id !== null).map((e) => e.src_op_id!));
    const consumers = new Set(edges.filter((e) => e.src_op_id === selected.op_id).map((e) => e.dst_op_id));
    const health = answer.health ?? {};
    // The canvas's own size (the SVG fills it): framing at another size would rescale the text.
    const cw = Math.max(1, this.canvas.clientWidth || 600);
    const ch = Math.max(1, this.canvas.clientHeight || 400);
    const layOut = (shown: Set<number>) => {
      const g = new dagre.graphlib.Graph({ multigraph: true });
      g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 36, marginx: 16, marginy: 16 });
      g.setDefaultEdgeLabel(() => ({}));
      for (const id of shown) {
        const op = byId.get(id)!;
        const extra = this.expanded.has(id) ? op.original_ops.length * ORIG_ROW_H + 6 : 0;
        g.setNode(`op${id}`, { width: NODE_W, height: NODE_H + extra });
      }
      const paramNodes = new Map<string, { label: string; title: string; health: Health | null }>();
      for (const e of edges) {
        if (!shown.has(e.dst_op_id)) continue;
        if (e.src_op_id !== null) {
          if (shown.has(e.src_op_id))
            g.setEdge(
              `op${e.src_op_id}`,
              `op${e.dst_op_id}`,
              { name: e.name },
              `${e.src_op_id}.${e.src_output_slot}-${e.dst_op_id}.${e.dst_input_slot}`,
            );
          continue;
        }
        if (e.kind !== "PARAM") continue;
        const pid = `param${e.param_index}`;
        if (!paramNodes.has(pid)) {
          const p = answer.params.find((x) => x.index === e.param_index);
          const summary = e.param_index === null ? undefined : answer.param_health?.[String(e.param_index)];
          const hl = summary && Object.keys(summary.summary).length ? summaryHealth(summary) : null;
          const title = `${p ? `${p.name}: ${p.dtype} ${formatShapeExpr(p.shape_expr)}` : e.name}${hl ? `\n${healthText(hl)}` : ""}`;
          paramNodes.set(pid, { label: e.name || `param ${e.param_index}`, title, health: hl });
          g.setNode(pid, { width: PARAM_W, height: PARAM_H });
        }
        g.setEdge(pid, `op${e.dst_op_id}`, { name: e.name }, `${pid}-${e.dst_op_id}.${e.dst_input_slot}`);
      }
      dagre.layout(g);
      return { g, paramNodes };
    };
    // The whole graph when it is small (or asked for), else the op's neighbourhood; when the op
    // with its inputs and consumers then cannot be framed legibly (they sit far apart in a big
    // layout), a nearer neighbourhood is laid out, down to the op with its direct neighbours.
    const candidates: ShownOps[] = [];
    if (answer.whole) candidates.push(everything(answer));
    if (!this.wholeGraph || !answer.whole)
      for (let depth = NEIGHBORHOOD_DEPTH; depth >= 1; depth--) candidates.push(nearer(answer, depth, NEIGHBORHOOD_OPS));
    let hood = candidates[0];
    let laid = layOut(new Set(hood.ops));
    for (const next of candidates.slice(1)) {
      if (this.wholeGraph || framingScale(laid.g, selected.op_id, [...inputs, ...consumers], cw, ch) >= MIN_LEGIBLE_SCALE) break;
      if (next.ops.length >= hood.ops.length) continue; // the same ops: the same layout
      hood = next;
      laid = layOut(new Set(hood.ops));
    }
    const { g, paramNodes } = laid;
    const shown = new Set(hood.ops);
    const size = g.graph() as { width?: number; height?: number };

    const root = svg("svg", { class: "graph-svg", role: "img", "aria-label": "graph structure" });
    root.appendChild(arrowDefs());
    const edgesG = svg("g", { class: "edges" });
    for (const ed of g.edges()) {
      const pts = (g.edge(ed) as { points: { x: number; y: number }[] }).points;
      const d = pts.map((p, i) => `${i ? "L" : "M"} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`).join(" ");
      const touches = ed.v === `op${selected.op_id}` ? "out" : ed.w === `op${selected.op_id}` ? "in" : "";
      const label = (g.edge(ed) as { name?: string }).name ?? "";
      const title = svg("title");
      title.textContent = label;
      edgesG.appendChild(svg("path", { d, class: `edge${touches ? ` edge-${touches}` : ""}`, "marker-end": "url(#arrow)" }, title));
    }
    root.appendChild(edgesG);
    const nodesG = svg("g", { class: "nodes" });
    for (const [pid, p] of paramNodes) {
      const n = g.node(pid) as NodeBox;
      const state = !p.health ? "unknown" : isNonFinite(p.health) ? "bad" : "ok";
      const grp = svg("g", {
        class: `node param-node health-${state}`,
        transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})`,
        "data-param": pid,
      });
      grp.appendChild(svg("rect", { width: n.width, height: n.height, rx: 12 }));
      const text = svg("text", { x: n.width / 2, y: 17, "text-anchor": "middle", "data-lod": p.label });
      text.textContent = truncate(p.label, 16);
      grp.appendChild(text);
      const title = svg("title");
      title.textContent = p.title;
      grp.appendChild(title);
      nodesG.appendChild(grp);
    }
    for (const id of shown) {
      const op = byId.get(id)!;
      const n = g.node(`op${id}`) as NodeBox;
      const trace = health[String(id)];
      const hl = trace ? healthOf(trace) : null;
      const role = id === selected.op_id ? "selected" : inputs.has(id) ? "input" : consumers.has(id) ? "consumer" : "";
      const state = !hl ? "unknown" : isNonFinite(hl) ? "bad" : "ok";
      const mark = this.marks?.run === this.store.run ? this.marks.ops.get(id) : undefined;
      nodesG.appendChild(this.opNode(op, n, role, state, hl, hood.frontier.has(id), trace, mark));
    }
    root.appendChild(nodesG);
    const home = frame(g, selected.op_id, inputs, consumers, shown, size, cw, ch);
    this.show({ root, extent: { x: 0, y: 0, w: size.width ?? cw, h: size.height ?? ch }, home }, this.wholeGraph);
    if (shown.size < answer.num_ops) {
      // Said under the drawing, where it never hides a node and never cuts the title.
      this.setNote(
        `${this.note.textContent ? `${this.note.textContent} · ` : ""}${shown.size} of ${answer.num_ops} kernels shown, around ${selected.op_name}`,
      );
    }
  }

  /** The selected op's inputs (producers and function parameters) and consumers as text; each
   * op is a link through the one navigation model (Store.goToOp keeps an execution). */
  private renderLinks(op: OpInfo): void {
    const health = op.health ?? {};
    const link = (id: number, name: string | null, cls: string) => {
      const t = health[String(id)];
      const bad = t ? isNonFinite(healthOf(t)) : false;
      return h(
        "a",
        {
          href: "#",
          class: `graph-link ${cls}${bad ? " bad" : ""}`,
          "data-op-id": String(id),
          title: `${name ?? `op ${id}`}${t ? `\n${healthText(healthOf(t))}` : ""}`,
          onclick: (e: Event) => (e.preventDefault(), void this.store.goToOp(id)),
        },
        name ?? `op ${id}`,
      );
    };
    const ins: (HTMLElement | string)[] = [];
    const seen = new Set<string>();
    for (const inp of op.inputs) {
      const key = inp.producer_op_id !== null ? `op${inp.producer_op_id}` : `p${inp.param_index}|${inp.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (inp.producer_op_id !== null) ins.push(link(inp.producer_op_id, inp.producer_op_name, "graph-input-link"));
      else ins.push(h("span", { class: "graph-param", title: inp.kind.toLowerCase() }, inp.name || `param ${inp.param_index}`));
    }
    const consumerIds = [...new Map(op.consumers.map((c) => [c.op_id, c.op_name])).entries()];
    const outs: (HTMLElement | string)[] = consumerIds.map(([id, name]) => link(id, name, "graph-consumer-link"));
    if (op.num_consumers > op.consumers.length) outs.push(`${op.num_consumers - op.consumers.length} more`);
    const list = (items: (HTMLElement | string)[]) =>
      items.length ? items.flatMap((x, i) => (i ? [", ", x] : [x])) : [h("span", { class: "muted" }, "none")];
    setChildren(
      this.links,
      h("span", { class: "graph-links-row", "data-testid": "graph-inputs" }, h("span", { class: "muted" }, "inputs: "), list(ins)),
      h("span", { class: "graph-links-row", "data-testid": "graph-consumers" }, h("span", { class: "muted" }, "consumers: "), list(outs)),
    );
  }

  private opNode(
    op: HoodAnswer["ops"][number],
    n: NodeBox,
    role: string,
    state: string,
    hl: Health | null,
    frontier: boolean,
    trace: TraceData | undefined,
    mark?: OpMark,
  ): SVGElement {
    const paused = this.store.pause?.opId === op.op_id && this.store.pause.graphId === op.graph_id;
    const grp = svg("g", {
      class: `node op-node${role ? ` role-${role}` : ""} health-${state}${mark ? ` mark-${mark.cls}` : ""}${paused ? " paused" : ""}`,
      transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})`,
      "data-op-id": String(op.op_id),
      "data-op-name": op.op_name,
      "data-cx": String(n.x),
      "data-cy": String(n.y),
      tabindex: role === "selected" ? "0" : "-1",
      role: "button",
      "aria-label": `${op.op_name} = ${op.kernel}${hl ? `, ${healthText(hl)}` : ""}${role ? `, ${role}` : ""}`,
    });
    const activate = () => {
      if (trace) void this.store.selectTrace(trace.position, trace.index);
      else void this.store.goToOp(op.op_id);
    };
    grp.addEventListener("click", activate);
    grp.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        activate();
      }
    });
    grp.appendChild(svg("rect", { class: "node-box", width: n.width, height: n.height, rx: 5 }));
    // Tags (a comparison's verdict, the live pause) sit on the node's top edge, to the right.
    const tags: { text: string; cls: string }[] = [];
    if (paused) tags.push({ text: "‖", cls: "tag-paused" });
    if (mark) tags.push({ text: mark.tag, cls: `tag-${mark.cls}` });
    const name = svg("text", { x: 8, y: 17, class: "node-name", "data-lod": op.op_name });
    name.textContent = truncate(op.op_name, tags.length ? 17 : 23);
    grp.appendChild(name);
    const kernel = svg("text", { x: 8, y: 33, class: "node-kernel" });
    kernel.textContent = truncate(op.kernel, 27);
    grp.appendChild(kernel);
    let right = n.width - (op.original_ops.length > 1 ? 30 : 4);
    for (const t of tags) {
      const w = 10 + 7.5 * [...t.text].length;
      right -= w;
      const tag = svg("g", { class: `node-tag ${t.cls}`, transform: `translate(${right},${-8})` });
      tag.appendChild(svg("rect", { width: w, height: 16, rx: 3 }));
      const text = svg("text", { x: w / 2, y: 12, "text-anchor": "middle" });
      text.textContent = t.text;
      tag.appendChild(text);
      grp.appendChild(tag);
      right -= 3;
    }
    if (hl) {
      const segs = pillSegments(hl).filter((s) => s.count > 0);
      const total = segs.reduce((a, s) => a + s.count, 0) || 1;
      let x = 8;
      const width = n.width - 16;
      for (const s of segs) {
        const w = (s.count / total) * width;
        grp.appendChild(svg("rect", { x, y: 40, width: Math.max(w, 1.5), height: 5, class: `gseg seg-${s.kind}` }));
        x += w;
      }
    }
    const title = svg("title");
    title.textContent = `${op.op_name} = ${op.kernel} (${op.call_type})${hl ? `\n${healthText(hl)}` : ""}${op.original_ops.length ? `\nops: ${op.original_ops.map((o) => o.op_type).join(", ")}` : ""}${mark ? `\n${mark.title}` : ""}`;
    grp.appendChild(title);
    if (op.original_ops.length > 1) {
      const open = this.expanded.has(op.op_id);
      const toggle = svg("text", { x: n.width - 8, y: 17, "text-anchor": "end", class: "node-toggle", "data-expand": String(op.op_id) });
      toggle.textContent = open ? "−" : `+${op.original_ops.length}`;
      toggle.addEventListener("click", (e) => {
        e.stopPropagation();
        if (open) this.expanded.delete(op.op_id);
        else this.expanded.add(op.op_id);
        void this.render();
      });
      const tt = svg("title");
      tt.textContent = open ? "collapse" : `expand into its ${op.original_ops.length} original ops`;
      toggle.appendChild(tt);
      grp.appendChild(toggle);
      if (open) {
        op.original_ops.forEach((o, i) => {
          const row = svg("text", { x: 12, y: NODE_H + 10 + i * ORIG_ROW_H, class: `orig-op${o.location ? " has-loc" : ""}` });
          row.textContent = truncate(
            `${o.var_name} = ${o.op_type.replace(/^relax\./, "")}  ${o.location ? formatLocation(o.location) : ""}`,
            29,
          );
          if (hasLine(o.location)) {
            const loc = o.location;
            row.addEventListener("click", (e) => {
              e.stopPropagation();
              this.store.showFrame({ file_path: loc.file_path, file_index: -1, line: loc.line, function: loc.function });
            });
          }
          grp.appendChild(row);
        });
      }
    }
    if (frontier) {
      const more = svg("text", { x: n.width - 8, y: n.height - 6, "text-anchor": "end", class: "node-more" });
      more.textContent = "…";
      grp.appendChild(more);
    }
    return grp;
  }

  private applyView(): void {
    const svgEl = this.svgEl;
    if (!svgEl) return;
    const w = Math.max(1, this.canvas.clientWidth) / this.view.scale;
    const hgt = Math.max(1, this.canvas.clientHeight) / this.view.scale;
    svgEl.setAttribute("viewBox", `${this.view.cx - w / 2} ${this.view.cy - hgt / 2} ${w} ${hgt}`);
    // Levels of detail: below a legible zoom, names are drawn at screen size (set once the zoom settles).
    const far = this.view.scale < MIN_LEGIBLE_SCALE;
    svgEl.classList.toggle("lod-far", far);
    clearTimeout(this.lodTimer);
    if (far) this.lodTimer = window.setTimeout(() => this.lodLabels(), 60);
    else svgEl.querySelectorAll(".lod-label").forEach((t) => t.remove());
  }

  /** Zoomed out: each node's name at LOD_FONT_PX on screen, cut to its node's width on screen;
   * nothing where not three characters fit. The full text stays in the node's tooltip. */
  private lodLabels(): void {
    const svgEl = this.svgEl;
    if (!svgEl || this.view.scale >= MIN_LEGIBLE_SCALE) return;
    const scale = this.view.scale;
    svgEl.querySelectorAll(".lod-label").forEach((t) => t.remove());
    for (const node of svgEl.querySelectorAll<SVGGElement>(".node")) {
      const source = node.querySelector<SVGTextElement>("[data-lod]");
      const box = node.querySelector<SVGRectElement>("rect");
      if (!source || !box) continue;
      const chars = Math.floor((Number(box.getAttribute("width")) * scale - 6) / LOD_CHAR_PX);
      if (chars < 3) continue;
      const label = svg("text", {
        class: "lod-label",
        x: 3 / scale,
        y: (LOD_FONT_PX + 2) / scale,
        style: `font-size: ${LOD_FONT_PX / scale}px`,
      });
      label.textContent = truncate(source.dataset.lod ?? "", chars);
      node.appendChild(label);
    }
  }

  /** Frames the selected op with its inputs and consumers (the default view). */
  zoomToSelection(): void {
    this.view = { ...this.home };
    this.applyView();
  }

  /** Fits everything drawn into the panel, at whatever zoom that takes. */
  fit(): void {
    const cw = Math.max(1, this.canvas.clientWidth || 600);
    const ch = Math.max(1, this.canvas.clientHeight || 400);
    const e = this.extent;
    const scale = Math.min(1.2, cw / (e.w + 2 * FRAME_PAD), ch / (e.h + 2 * FRAME_PAD));
    this.view = { cx: e.x + e.w / 2, cy: e.y + e.h / 2, scale };
    this.applyView();
  }

  /** Zooms about the view's centre (f > 1: in). */
  private zoom(f: number): void {
    this.view = { ...this.view, scale: this.view.scale * f };
    this.applyView();
  }

  private enablePanZoom(root: SVGSVGElement): void {
    let drag: { x: number; y: number; cx: number; cy: number } | null = null;
    root.addEventListener("pointerdown", (e) => {
      if ((e.target as Element).closest(".op-node, .param-node, .group-node")) return;
      drag = { x: e.clientX, y: e.clientY, cx: this.view.cx, cy: this.view.cy };
      root.setPointerCapture(e.pointerId);
    });
    root.addEventListener("pointermove", (e) => {
      if (!drag) return;
      this.view.cx = drag.cx - (e.clientX - drag.x) / this.view.scale;
      this.view.cy = drag.cy - (e.clientY - drag.y) / this.view.scale;
      this.applyView();
    });
    root.addEventListener("pointerup", () => (drag = null));
    root.addEventListener(
      "wheel",
      (e) => {
        e.preventDefault();
        const f = Math.exp(-e.deltaY * 0.0015);
        const r = root.getBoundingClientRect();
        // The layout point under the pointer stays under it.
        const dx = e.clientX - r.left - r.width / 2;
        const dy = e.clientY - r.top - r.height / 2;
        const px = this.view.cx + dx / this.view.scale;
        const py = this.view.cy + dy / this.view.scale;
        const scale = this.view.scale * f;
        this.view = { cx: px - dx / scale, cy: py - dy / scale, scale };
        this.applyView();
      },
      { passive: false },
    );
  }
}

type Layout = { node(id: string): unknown; hasNode(id: string): boolean };

/** The box of the selected op and the given neighbours (those laid out). */
function boxOf(g: Layout, selected: number, ids: Iterable<number>): number[] {
  const sel = g.node(`op${selected}`) as NodeBox;
  let b = [sel.x - sel.width / 2, sel.y - sel.height / 2, sel.x + sel.width / 2, sel.y + sel.height / 2];
  for (const id of ids) {
    const n = g.hasNode(`op${id}`) ? (g.node(`op${id}`) as NodeBox) : undefined;
    if (n)
      b = [
        Math.min(b[0], n.x - n.width / 2),
        Math.min(b[1], n.y - n.height / 2),
        Math.max(b[2], n.x + n.width / 2),
        Math.max(b[3], n.y + n.height / 2),
      ];
  }
  return b;
}

/** The zoom at which the selected op with the given neighbours (those laid out) fits the canvas. */
function framingScale(g: Layout, selected: number, ids: number[], cw: number, ch: number): number {
  const [x0, y0, x1, y1] = boxOf(g, selected, ids);
  return Math.min(cw / (x1 - x0 + 2 * FRAME_PAD), ch / (y1 - y0 + 2 * FRAME_PAD));
}

/** The view that frames the selected op with its drawn inputs and consumers, at the usual zoom
 * (0.92-1.2, the whole graph when it fits), lower only when they need it; too many to frame
 * legibly: the op and its inputs, else the op alone (the text list under the drawing names the rest). */
function frame(
  g: Layout,
  selected: number,
  inputs: Set<number>,
  consumers: Set<number>,
  shown: Set<number>,
  size: { width?: number; height?: number },
  cw: number,
  ch: number,
): { cx: number; cy: number; scale: number } {
  const drawn = (ids: Iterable<number>) => [...ids].filter((id) => shown.has(id));
  const fitOf = (b: number[]) => Math.min(cw / (b[2] - b[0] + 2 * FRAME_PAD), ch / (b[3] - b[1] + 2 * FRAME_PAD));
  let box = boxOf(g, selected, drawn([...inputs, ...consumers]));
  if (fitOf(box) < MIN_LEGIBLE_SCALE) box = boxOf(g, selected, drawn(inputs));
  if (fitOf(box) < MIN_LEGIBLE_SCALE) box = boxOf(g, selected, []);
  const fit = fitOf(box);
  const wholeFit = Math.min(cw / ((size.width ?? cw) + 20), ch / ((size.height ?? ch) + 20));
  const scale = Math.max(MIN_LEGIBLE_SCALE, Math.min(fit, Math.min(1.2, Math.max(MIN_LEGIBLE_SCALE, wholeFit))));
  return { cx: (box[0] + box[2]) / 2, cy: (box[1] + box[3]) / 2, scale };
}
