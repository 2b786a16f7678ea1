/** Which ops of a graph to lay out around a selection. The server walks the graph
 * (graphs/neighborhood: breadth first, nearest first, bounded) and says each op's distance; a
 * nearer neighbourhood (when the selection's inputs and consumers do not fit legibly) is a
 * prefix of that answer, found here without asking again. */
import type { Edge } from "./api";

export interface ShownOps {
  /** Op ids to draw, the centre first. */
  ops: number[];
  /** Ops drawn that have neighbours left out (drawn with a "more" marker). */
  frontier: Set<number>;
}

/** What nearer() reads of a graphs/neighborhood answer. */
export interface HoodAnswer {
  ops: { op_id: number; distance: number | null }[];
  edges: Edge[];
  frontier: number[];
}

/** The ops of `answer` within `depth` edges of its centre, at most `maxOps` (nearest first), and
 * which of them have neighbours left out: those the answer already marks, and those with an
 * edge to an op of the answer not kept. */
export function nearer(answer: HoodAnswer, depth: number, maxOps: number): ShownOps {
  const ops = answer.ops
    .filter((o) => o.distance !== null && o.distance <= depth)
    .slice(0, maxOps)
    .map((o) => o.op_id);
  const kept = new Set(ops);
  const frontier = new Set(answer.frontier.filter((id) => kept.has(id)));
  for (const e of answer.edges) {
    if (e.src_op_id === null) continue;
    const [a, b] = [e.src_op_id, e.dst_op_id];
    if (kept.has(a) !== kept.has(b)) frontier.add(kept.has(a) ? a : b);
  }
  return { ops, frontier };
}

/** Every op of an answer (a whole graph), none marked as having more. */
export function everything(answer: HoodAnswer): ShownOps {
  return { ops: answer.ops.map((o) => o.op_id), frontier: new Set(answer.frontier) };
}
