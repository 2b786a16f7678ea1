/**
 * Graph structure: the compiled function's kernels as nodes and tensors as edges, laid out with
 * dagre. Only the selected op's neighbourhood is laid out (lazy layout keeps large graphs
 * responsive; frontier nodes say more is hidden); the selected op is centred, its inputs and
 * consumers highlighted and every node coloured by its health in the selected execution. A
 * fused kernel expands into the original Relax ops folded into it.
 */
import dagre from "@dagrejs/dagre";
import type { ExecutionData, GraphInfo, Op, TraceData } from "../api";
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
  summaryHealth,
} from "../format";
import { type Neighborhood, neighborhood } from "../neighborhood";
import type { Store } from "../store";

const NODE_W = 184;
const NODE_H = 46;
const ORIG_ROW_H = 17;
const PARAM_W = 110;
const PARAM_H = 24;
/** Graphs up to this many ops are drawn whole; larger ones around the selection. */
const WHOLE_GRAPH_LIMIT = 60;
const NEIGHBORHOOD_OPS = 48;
const NEIGHBORHOOD_DEPTH = 4;
/** Never lay out more than this many ops at once ("whole graph" on a huge graph shows the
 * nearest ones): dagre's cost grows faster than linearly. */
const MAX_LAYOUT_OPS = 400;
/** Framing never zooms out below this: node names (11 px) stay above 10 px on screen. When
 * the op with its inputs and consumers does not fit, the op and its inputs are framed and the
 * text list under the drawing carries the rest. */
export const MIN_LEGIBLE_SCALE = 0.92;
/** Margin around the framed op and its neighbours, in layout units. */
const FRAME_PAD = 14;

/** An optional mark on an op node set by another view (the Compare view's error colours):
 * the node gets class `mark-<cls>` and the title line `title`. */
export interface OpMark {
  cls: string;
  title: string;
}

interface NodeBox {
  id: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

export class GraphPanel {
  readonly el: HTMLElement;
  private readonly title: HTMLElement;
  private readonly canvas: HTMLElement;
  private readonly legend: HTMLElement;
  /** Text list of the selected op's inputs and consumers: always readable, whatever the zoom. */
  private readonly links: HTMLElement;
  private readonly enlargeBtn: HTMLButtonElement;
  private expanded = new Set<number>();
  private view = { x: 0, y: 0, w: 100, h: 100 };
  /** The view that centres the selected op, restored by the "centre" button after panning. */
  private home = { x: 0, y: 0, w: 100, h: 100 };
  private svgEl: SVGSVGElement | null = null;
  private seq = 0;
  private wholeGraph = false;
  private marks: { run: string; ops: Map<number, OpMark> } | null = null;

  constructor(private readonly store: Store) {
    this.title = h("span", { class: "muted" });
    this.canvas = h("div", { class: "graph-canvas" });
    this.legend = h(
      "div",
      { class: "graph-legend small" },
      h("span", { class: "lg lg-selected" }, "selected"),
      h("span", { class: "lg lg-input" }, "input"),
      h("span", { class: "lg lg-consumer" }, "consumer"),
      h("span", { class: "lg lg-bad" }, "non-finite"),
      h("span", { class: "lg lg-ok" }, "finite"),
    );
    const wholeBox = h("input", {
      type: "checkbox",
      "data-testid": "whole-graph",
      onchange: (e: Event) => {
        this.wholeGraph = (e.target as HTMLInputElement).checked;
        void this.render();
      },
    });
    const whole = h("label", { class: "small" }, wholeBox, " whole graph");
    this.links = h("div", { class: "graph-links small", "data-testid": "graph-links" });
    this.enlargeBtn = h(
      "button",
      {
        class: "small-btn",
        "data-testid": "graph-enlarge",
        title: "show the graph over the whole page (Esc closes)",
        onclick: () => this.setEnlarged(!this.enlarged),
      },
      "enlarge",
    );
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.enlarged) this.setEnlarged(false);
    });
    this.el = h(
      "section",
      { class: "panel graph-panel", "data-panel": "graph" },
      h(
        "header",
        { class: "panel-head" },
        h("h2", null, "Graph structure"),
        this.title,
        h("span", { class: "spacer" }),
        whole,
        h("button", { class: "small-btn", onclick: () => this.centre(), title: "centre on the selected op" }, "centre"),
        this.enlargeBtn,
      ),
      this.canvas,
      this.links,
      this.legend,
    );
    store.on("run", () => {
      this.expanded.clear();
      this.wholeGraph = wholeBox.checked = false; // per-run state starts afresh
      void this.render();
    });
    store.on("op", () => void this.render());
  }

  /** Marks op nodes of `run` until replaced (null clears): shown whenever that run is drawn. */
  setMarks(run: string | null, ops: Map<number, OpMark> = new Map()): void {
    this.marks = run === null ? null : { run, ops };
    void this.render();
  }

  private get enlarged(): boolean {
    return this.el.classList.contains("enlarged");
  }

  /** Full-page view of the graph (a larger drawing area), framed again for its new size. */
  private setEnlarged(on: boolean): void {
    this.el.classList.toggle("enlarged", on);
    this.enlargeBtn.textContent = on ? "close" : "enlarge";
    this.enlargeBtn.setAttribute("aria-pressed", String(on));
    void this.render();
  }

  private async render(): Promise<void> {
    const seq = ++this.seq;
    const run = this.store.run;
    const op = this.store.op;
    if (run === null || !op) {
      this.title.textContent = "";
      this.svgEl = null;
      setChildren(this.links);
      return setChildren(this.canvas, h("div", { class: "empty" }, "Select a kernel execution or an alert to see its op in the graph."));
    }
    try {
      const trace = this.store.trace && this.store.trace.op_id === op.op_id ? this.store.trace : null;
      const [graph, health, call] = await Promise.all([
        this.store.graphInfo(op.graph_id),
        trace ? this.store.executionTraces(trace.execution_index) : Promise.resolve(new Map<number, TraceData>()),
        trace ? this.store.executionByIndex(trace.execution_index) : Promise.resolve(null),
      ]);
      if (seq !== this.seq) return;
      this.title.textContent = `${graph.name} · ${graph.ops.length} kernels${trace ? ` · execution ${trace.execution_index}` : ""}`;
      this.draw(graph, op, health, call);
    } catch (err) {
      if (seq !== this.seq) return;
      setChildren(this.canvas, h("div", { class: "error-box" }, err instanceof Error ? err.message : String(err)));
      this.store.reportError(err);
    }
  }

  private draw(graph: GraphInfo, selected: Op, health: Map<number, TraceData>, call: ExecutionData | null): void {
    const byId = new Map(graph.ops.map((o) => [o.op_id, o]));
    const inputs = new Set(graph.edges.filter((e) => e.dst_op_id === selected.op_id && e.src_op_id !== null).map((e) => e.src_op_id!));
    const consumers = new Set(graph.edges.filter((e) => e.src_op_id === selected.op_id).map((e) => e.dst_op_id));
    this.renderLinks(graph, selected, byId, health);

    const cw = Math.max(200, this.canvas.clientWidth || 600);
    const ch = Math.max(150, this.canvas.clientHeight || 400);
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
      for (const e of graph.edges) {
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
          const p = graph.params.find((x) => x.index === e.param_index);
          const summary = e.param_index === null ? undefined : call?.inputs[e.param_index];
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
    const askedWhole = this.wholeGraph && graph.ops.length <= MAX_LAYOUT_OPS;
    const candidates: Neighborhood[] = [];
    if (graph.ops.length <= WHOLE_GRAPH_LIMIT || askedWhole)
      candidates.push({ ops: graph.ops.map((o) => o.op_id), frontier: new Set<number>() });
    if (this.wholeGraph && !askedWhole) candidates.push(neighborhood(selected.op_id, graph.edges, Infinity, MAX_LAYOUT_OPS));
    if (!this.wholeGraph)
      for (let depth = NEIGHBORHOOD_DEPTH; depth >= 1; depth--)
        candidates.push(neighborhood(selected.op_id, graph.edges, depth, NEIGHBORHOOD_OPS));
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
    const whole = shown.size === graph.ops.length;
    const size = g.graph() as { width?: number; height?: number };

    const root = svg("svg", { class: "graph-svg", role: "img", "aria-label": "graph structure" });
    const defs = svg(
      "defs",
      {},
      svg(
        "marker",
        { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }),
      ),
    );
    root.appendChild(defs);
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
      const text = svg("text", { x: n.width / 2, y: 16, "text-anchor": "middle" });
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
      const trace = health.get(id);
      const hl = trace ? healthOf(trace) : null;
      const role = id === selected.op_id ? "selected" : inputs.has(id) ? "input" : consumers.has(id) ? "consumer" : "";
      const state = !hl ? "unknown" : isNonFinite(hl) ? "bad" : "ok";
      const mark = this.marks?.run === this.store.run ? this.marks.ops.get(id) : undefined;
      nodesG.appendChild(this.opNode(op, n, role, state, hl, hood.frontier.has(id), trace, mark));
    }
    root.appendChild(nodesG);
    this.svgEl = root;
    const sel = g.node(`op${selected.op_id}`) as NodeBox;
    // Frame the selected op with all its drawn inputs and consumers: the box around them, at
    // the usual zoom (0.75-1.2, the whole graph when it fits), lower only when they need it.
    let [x0, y0, x1, y1] = [sel.x - sel.width / 2, sel.y - sel.height / 2, sel.x + sel.width / 2, sel.y + sel.height / 2];
    for (const id of [...inputs, ...consumers]) {
      if (!shown.has(id)) continue;
      const n = g.node(`op${id}`) as NodeBox | undefined;
      if (!n) continue;
      x0 = Math.min(x0, n.x - n.width / 2);
      y0 = Math.min(y0, n.y - n.height / 2);
      x1 = Math.max(x1, n.x + n.width / 2);
      y1 = Math.max(y1, n.y + n.height / 2);
    }
    const pad = FRAME_PAD;
    const boxOf = (ids: Iterable<number>) => {
      let b = [sel.x - sel.width / 2, sel.y - sel.height / 2, sel.x + sel.width / 2, sel.y + sel.height / 2];
      for (const id of ids) {
        const n = shown.has(id) ? (g.node(`op${id}`) as NodeBox | undefined) : undefined;
        if (n)
          b = [
            Math.min(b[0], n.x - n.width / 2),
            Math.min(b[1], n.y - n.height / 2),
            Math.max(b[2], n.x + n.width / 2),
            Math.max(b[3], n.y + n.height / 2),
          ];
      }
      return b;
    };
    const fitOf = (b: number[]) => Math.min(cw / (b[2] - b[0] + 2 * pad), ch / (b[3] - b[1] + 2 * pad));
    // Too many to frame legibly: the op and its inputs first (the text list names the rest).
    if (fitOf([x0, y0, x1, y1]) < MIN_LEGIBLE_SCALE) [x0, y0, x1, y1] = boxOf(inputs);
    const fit = fitOf([x0, y0, x1, y1]);
    const wholeFit = Math.min(cw / ((size.width ?? cw) + 20), ch / ((size.height ?? ch) + 20));
    const scale = Math.max(MIN_LEGIBLE_SCALE, Math.min(fit, Math.min(1.2, Math.max(MIN_LEGIBLE_SCALE, wholeFit))));
    const cx = (x0 + x1) / 2;
    const cy = (y0 + y1) / 2;
    this.view = { w: cw / scale, h: ch / scale, x: cx - cw / scale / 2, y: cy - ch / scale / 2 };
    this.home = { ...this.view };
    this.applyView();
    this.enablePanZoom(root);
    // Said in the text row under the drawing, where it never hides a node.
    if (!whole)
      this.links.appendChild(
        h("span", { class: "graph-note muted" }, `showing ${shown.size} of ${graph.ops.length} kernels around ${selected.op_name}`),
      );
    setChildren(this.canvas, root);
  }

  /** The selected op's inputs (producers and function parameters) and consumers as text; each
   * op is a link through the one navigation model (Store.goToOp keeps an execution). */
  private renderLinks(graph: GraphInfo, selected: Op, byId: Map<number, Op>, health: Map<number, TraceData>): void {
    const link = (id: number, cls: string) => {
      const op = byId.get(id);
      const t = health.get(id);
      const bad = t ? isNonFinite(healthOf(t)) : false;
      return h(
        "a",
        {
          href: "#",
          class: `graph-link ${cls}${bad ? " bad" : ""}`,
          "data-op-id": String(id),
          title: op ? `${op.op_name} = ${op.kernel}${t ? `\n${healthText(healthOf(t))}` : ""}` : "",
          onclick: (e: Event) => (e.preventDefault(), void this.store.goToOp(id)),
        },
        op?.op_name ?? `op ${id}`,
      );
    };
    const ins: (HTMLElement | string)[] = [];
    const seen = new Set<string>();
    for (const e of graph.edges.filter((x) => x.dst_op_id === selected.op_id).sort((a, b) => a.dst_input_slot - b.dst_input_slot)) {
      const key = e.src_op_id !== null ? `op${e.src_op_id}` : `p${e.param_index}|${e.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (e.src_op_id !== null) ins.push(link(e.src_op_id, "graph-input-link"));
      else ins.push(h("span", { class: "graph-param", title: e.kind.toLowerCase() }, e.name || `param ${e.param_index}`));
    }
    const outs = [...new Set(graph.edges.filter((e) => e.src_op_id === selected.op_id).map((e) => e.dst_op_id))].map((id) =>
      link(id, "graph-consumer-link"),
    );
    const list = (items: (HTMLElement | string)[]) =>
      items.length ? items.flatMap((x, i) => (i ? [", ", x] : [x])) : [h("span", { class: "muted" }, "none")];
    setChildren(
      this.links,
      h("span", { class: "graph-links-row", "data-testid": "graph-inputs" }, h("span", { class: "muted" }, "inputs: "), list(ins)),
      h("span", { class: "graph-links-row", "data-testid": "graph-consumers" }, h("span", { class: "muted" }, "consumers: "), list(outs)),
    );
  }

  private opNode(
    op: Op,
    n: NodeBox,
    role: string,
    state: string,
    hl: Health | null,
    frontier: boolean,
    trace: TraceData | undefined,
    mark?: OpMark,
  ): SVGElement {
    const grp = svg("g", {
      class: `node op-node${role ? ` role-${role}` : ""} health-${state}${mark ? ` mark-${mark.cls}` : ""}`,
      transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})`,
      "data-op-id": String(op.op_id),
      "data-op-name": op.op_name,
    });
    grp.addEventListener("click", () => {
      if (trace) void this.store.selectTrace(trace.position, trace.index);
      else void this.store.goToOp(op.op_id);
    });
    grp.appendChild(svg("rect", { class: "node-box", width: n.width, height: n.height, rx: 5 }));
    const name = svg("text", { x: 8, y: 16, class: "node-name" });
    name.textContent = truncate(op.op_name, 22);
    grp.appendChild(name);
    const kernel = svg("text", { x: 8, y: 30, class: "node-kernel" });
    kernel.textContent = truncate(op.kernel, 28);
    grp.appendChild(kernel);
    if (hl) {
      const segs = pillSegments(hl).filter((s) => s.count > 0);
      const total = segs.reduce((a, s) => a + s.count, 0) || 1;
      let x = 8;
      const width = n.width - 16;
      for (const s of segs) {
        const w = (s.count / total) * width;
        grp.appendChild(svg("rect", { x, y: 36, width: Math.max(w, 1.5), height: 5, class: `gseg seg-${s.kind}` }));
        x += w;
      }
    }
    const title = svg("title");
    title.textContent = `${op.op_name} = ${op.kernel} (${op.call_type})${hl ? `\n${healthText(hl)}` : ""}${op.original_ops.length ? `\nops: ${op.original_ops.map((o) => o.op_type).join(", ")}` : ""}${mark ? `\n${mark.title}` : ""}`;
    grp.appendChild(title);
    if (op.original_ops.length > 1) {
      const open = this.expanded.has(op.op_id);
      const toggle = svg("text", { x: n.width - 8, y: 16, "text-anchor": "end", class: "node-toggle", "data-expand": String(op.op_id) });
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
            30,
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
    this.svgEl?.setAttribute("viewBox", `${this.view.x} ${this.view.y} ${this.view.w} ${this.view.h}`);
  }

  private centre(): void {
    this.view = { ...this.home };
    this.applyView();
  }

  private enablePanZoom(root: SVGSVGElement): void {
    let drag: { x: number; y: number; vx: number; vy: number } | null = null;
    root.addEventListener("pointerdown", (e) => {
      if ((e.target as Element).closest(".op-node")) return;
      drag = { x: e.clientX, y: e.clientY, vx: this.view.x, vy: this.view.y };
      root.setPointerCapture(e.pointerId);
    });
    root.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const k = this.view.w / (root.clientWidth || 1);
      this.view.x = drag.vx - (e.clientX - drag.x) * k;
      this.view.y = drag.vy - (e.clientY - drag.y) * k;
      this.applyView();
    });
    root.addEventListener("pointerup", () => (drag = null));
    root.addEventListener(
      "wheel",
      (e) => {
        e.preventDefault();
        const f = Math.exp(e.deltaY * 0.0015);
        const r = root.getBoundingClientRect();
        const px = this.view.x + ((e.clientX - r.left) / (r.width || 1)) * this.view.w;
        const py = this.view.y + ((e.clientY - r.top) / (r.height || 1)) * this.view.h;
        this.view = { x: px - (px - this.view.x) * f, y: py - (py - this.view.y) * f, w: this.view.w * f, h: this.view.h * f };
        this.applyView();
      },
      { passive: false },
    );
  }
}

/** The zoom at which the selected op with the given neighbours (those laid out) fits the canvas. */
function framingScale(
  g: { node(id: string): unknown; hasNode(id: string): boolean },
  selected: number,
  ids: number[],
  cw: number,
  ch: number,
): number {
  const sel = g.node(`op${selected}`) as NodeBox;
  let [x0, y0, x1, y1] = [sel.x - sel.width / 2, sel.y - sel.height / 2, sel.x + sel.width / 2, sel.y + sel.height / 2];
  for (const id of ids) {
    const n = g.hasNode(`op${id}`) ? (g.node(`op${id}`) as NodeBox) : undefined;
    if (!n) continue;
    [x0, y0, x1, y1] = [
      Math.min(x0, n.x - n.width / 2),
      Math.min(y0, n.y - n.height / 2),
      Math.max(x1, n.x + n.width / 2),
      Math.max(y1, n.y + n.height / 2),
    ];
  }
  return Math.min(cw / (x1 - x0 + 2 * FRAME_PAD), ch / (y1 - y0 + 2 * FRAME_PAD));
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
