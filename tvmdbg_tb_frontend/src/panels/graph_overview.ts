/** A function too large to lay out, folded (graphs/overview): each node a group of consecutive
 * kernels in call order, named by its first and last op, its commonest Relax op types and its
 * lines, red when one of its kernels output NaN/Inf in the selected call; edges carry how many
 * tensors go from group to group. A click on a group opens it (the next level of detail, down
 * to single kernels, which a click selects). The group holding the selected op is marked. */
import dagre from "@dagrejs/dagre";
import type { OpInfo, Overview, OverviewGroup } from "../api";
import { svg } from "../dom";
import { baseName, formatCount, hasLine } from "../format";
import { type Drawn, type NodeBox, arrowDefs, truncate } from "./graph_svg";

const GROUP_W = 230;
const GROUP_H = 62;

export interface Range {
  begin: number;
  end: number;
}

export interface OverviewActions {
  open(range: Range): void;
  select(opId: number): void;
}

/** "model.py:10–30" for a group's first and last lines (one file), else the first's. */
function lines(g: OverviewGroup): string {
  const a = g.first_location;
  const b = g.last_location;
  if (!hasLine(a)) return "";
  if (hasLine(b) && b.file_path === a.file_path && b.line !== a.line) return `${baseName(a.file_path)}:${a.line}–${b.line}`;
  return `${baseName(a.file_path)}:${a.line}`;
}

function shortType(t: string): string {
  return t.slice(t.lastIndexOf(".") + 1);
}

export function drawOverview(overview: Overview, selected: OpInfo, actions: OverviewActions): Drawn {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 34, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const grp of overview.groups) g.setNode(`g${grp.index}`, { width: GROUP_W, height: GROUP_H });
  for (const e of overview.edges) g.setEdge(`g${e.src}`, `g${e.dst}`, { count: e.count });
  dagre.layout(g);
  const root = svg("svg", { class: "graph-svg overview-svg", role: "img", "aria-label": "folded graph" });
  root.appendChild(arrowDefs());
  const edges = svg("g", { class: "edges" });
  for (const ed of g.edges()) {
    const pts = (g.edge(ed) as { points: { x: number; y: number }[] }).points;
    const d = pts.map((p, i) => `${i ? "L" : "M"} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`).join(" ");
    const count = (g.edge(ed) as { count: number }).count;
    const title = svg("title");
    title.textContent = `${formatCount(count)} tensor${count === 1 ? "" : "s"}`;
    edges.appendChild(
      svg("path", { d, class: "edge", "marker-end": "url(#arrow)", "stroke-width": Math.min(4, 1 + Math.log2(count)) }, title),
    );
  }
  root.appendChild(edges);
  const nodes = svg("g", { class: "nodes" });
  let home: NodeBox | null = null;
  for (const grp of overview.groups) {
    const n = g.node(`g${grp.index}`) as NodeBox;
    const mine = selected.position >= grp.begin && selected.position < grp.end && selected.graph_id === overview.graph_id;
    if (mine) home = n;
    nodes.appendChild(groupNode(grp, n, mine, actions));
  }
  root.appendChild(nodes);
  const size = g.graph() as { width?: number; height?: number };
  const w = size.width ?? GROUP_W;
  const h = size.height ?? GROUP_H;
  const at = home ?? { x: w / 2, y: h / 2 };
  return { root, extent: { x: 0, y: 0, w, h }, home: { cx: at.x, cy: at.y, scale: 1 } };
}

function groupNode(grp: OverviewGroup, n: NodeBox, mine: boolean, actions: OverviewActions): SVGElement {
  const single = grp.num_ops === 1;
  const bad = (grp.nonfinite_ops ?? 0) > 0;
  const state = grp.nonfinite_ops === undefined || !grp.traced_ops ? "unknown" : bad ? "bad" : "ok";
  const name = single ? grp.first_op.op_name : `${grp.first_op.op_name} … ${grp.last_op.op_name}`;
  const node = svg("g", {
    class: `node group-node health-${state}${mine ? " role-selected" : ""}`,
    transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})`,
    "data-group": String(grp.index),
    "data-begin": String(grp.begin),
    "data-end": String(grp.end),
    "data-cx": String(n.x),
    "data-cy": String(n.y),
    tabindex: mine ? "0" : "-1",
    role: "button",
    "aria-label": `${name}, ${formatCount(grp.num_ops)} kernels${bad ? `, NaN or ∞ in ${grp.nonfinite_ops}` : ""}`,
  });
  const activate = () => (single ? actions.select(grp.first_op.op_id) : actions.open({ begin: grp.begin, end: grp.end }));
  node.addEventListener("click", activate);
  node.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      activate();
    }
  });
  node.appendChild(svg("rect", { class: "node-box", width: n.width, height: n.height, rx: single ? 5 : 9 }));
  const text = (y: number, cls: string, value: string, lod?: string) => {
    const t = svg("text", { x: 8, y, class: cls, ...(lod ? { "data-lod": lod } : {}) });
    t.textContent = value;
    node.appendChild(t);
  };
  text(17, "node-name", truncate(name, 27), name);
  const types = grp.op_types.map((t) => (single ? shortType(t.op_type) : `${shortType(t.op_type)} ${formatCount(t.count)}`)).join(", ");
  text(33, "node-kernel", truncate(single ? `${grp.first_op.kernel} · ${types}` : `${formatCount(grp.num_ops)} kernels: ${types}`, 31));
  text(50, "node-kernel", truncate(`${lines(grp)}${bad ? ` · NaN/∞ in ${formatCount(grp.nonfinite_ops!)}` : ""}`, 31));
  const title = svg("title");
  title.textContent = `${name}\n${formatCount(grp.num_ops)} kernels (ops ${grp.begin}–${grp.end - 1} in call order)\n${grp.op_types.map((t) => `${t.op_type} ×${t.count}`).join(", ")}${lines(grp) ? `\n${lines(grp)}` : ""}${bad ? `\nNaN/∞ in ${grp.nonfinite_ops} of its kernels in this call` : ""}\n${single ? "click: select" : "click: open"}`;
  node.appendChild(title);
  return node;
}
