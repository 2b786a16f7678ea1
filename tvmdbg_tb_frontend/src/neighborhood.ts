/** Which ops of a (possibly huge) graph to lay out: the selected op's neighbourhood, found by a
 * breadth-first walk over producer and consumer edges, bounded in depth and size. Laying out
 * only this keeps a graph of thousands of kernels responsive. */
import type { Edge } from "./api";

export interface Neighborhood {
  /** Op ids to draw, the centre first. */
  ops: number[];
  /** Ops drawn that have neighbours left out (drawn with a "more" marker). */
  frontier: Set<number>;
}

export function adjacency(edges: Edge[]): { up: Map<number, number[]>; down: Map<number, number[]> } {
  const up = new Map<number, number[]>();
  const down = new Map<number, number[]>();
  const add = (m: Map<number, number[]>, k: number, v: number) => {
    const list = m.get(k);
    if (list) {
      if (!list.includes(v)) list.push(v);
    } else m.set(k, [v]);
  };
  for (const e of edges) {
    if (e.src_op_id === null) continue;
    add(up, e.dst_op_id, e.src_op_id);
    add(down, e.src_op_id, e.dst_op_id);
  }
  return { up, down };
}

export function neighborhood(center: number, edges: Edge[], maxDepth: number, maxOps: number): Neighborhood {
  const { up, down } = adjacency(edges);
  const seen = new Set<number>([center]);
  const order = [center];
  let layer = [center];
  for (let depth = 0; depth < maxDepth && layer.length && order.length < maxOps; depth++) {
    const next: number[] = [];
    for (const id of layer) {
      for (const n of [...(up.get(id) ?? []), ...(down.get(id) ?? [])]) {
        if (seen.has(n) || order.length >= maxOps) continue;
        seen.add(n);
        order.push(n);
        next.push(n);
      }
    }
    layer = next;
  }
  const frontier = new Set<number>();
  for (const id of order) {
    for (const n of [...(up.get(id) ?? []), ...(down.get(id) ?? [])]) if (!seen.has(n)) frontier.add(id);
  }
  return { ops: order, frontier };
}
