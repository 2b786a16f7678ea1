/** Finding ops of a run by what a user knows about them: the op's name (`lv6`), its kernel
 * (`fused_matmul_add`), a Relax op type folded into it (`relax.log`, or just `log`), the
 * source line that created it (`model.py:33`, `:33`) or the imported model's node
 * (`/layer1/conv/Conv`). Pure (unit-tested); the graph panel's
 * node search and the source browser's line marks use it. */
import type { LineLocation, Op } from "./api";
import { baseName, hasLine } from "./format";

export interface OpMatch {
  op: Op;
  /** What matched, for the result list: "name", "kernel", "op type relax.log", "line x.py:3". */
  why: string;
  /** Lower is better: exact name, name prefix, kernel, op type, line, substring. */
  rank: number;
}

/** Every source line an op stands for: its own and those of the Relax ops fused into it (an
 * ONNX node without a recorded line has none). */
export function opLocations(op: Op): LineLocation[] {
  const out: LineLocation[] = [];
  const seen = new Set<string>();
  for (const loc of [op.location, ...op.original_ops.map((o) => o.location)]) {
    if (!hasLine(loc)) continue;
    const key = `${loc.file_path}:${loc.line}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(loc);
  }
  return out;
}

/** "file.py:33", ":33", "33" -> (file part or "", 33); null when the query is no line. */
function parseLine(query: string): { file: string; line: number } | null {
  const m = /^(.*?):?(\d+)$/.exec(query);
  if (!m) return null;
  if (m[1] && !query.includes(":")) return null; // "lv33" is a name, not a line
  return { file: m[1], line: Number(m[2]) };
}

/** Ops matching `query` (case-insensitive), best first, at most `limit`. */
export function searchOps(ops: Op[], query: string, limit = 50): OpMatch[] {
  const q = query.trim().toLowerCase();
  if (!q) return [];
  const line = parseLine(q);
  const bare = q.startsWith("relax.") ? q.slice(6) : q;
  const out: OpMatch[] = [];
  for (const op of ops) {
    const name = op.op_name.toLowerCase();
    const kernel = op.kernel.toLowerCase();
    const found: { best: OpMatch | null } = { best: null };
    const offer = (rank: number, why: string) => {
      if (!found.best || rank < found.best.rank) found.best = { op, why, rank };
    };
    if (name === q) offer(0, "name");
    else if (name.startsWith(q)) offer(1, "name");
    if (kernel === q) offer(2, "kernel");
    for (const o of op.original_ops) {
      const type = o.op_type.toLowerCase();
      const short = type.startsWith("relax.") ? type.slice(6) : type;
      if (type === q || short === bare) offer(3, `op type ${o.op_type}`);
      else if (short.includes(bare) && bare.length >= 3) offer(6, `op type ${o.op_type}`);
    }
    // The node of the imported model (torch.fx, ONNX) the op came from.
    for (const loc of [op.location, ...op.original_ops.map((o) => o.location)]) {
      const node = loc?.model_node?.name.toLowerCase();
      if (node && (node === q || (q.length >= 3 && node.includes(q)))) offer(node === q ? 2 : 6, `node ${loc!.model_node!.name}`);
    }
    if (line)
      for (const loc of opLocations(op)) {
        if (loc.line !== line.line) continue;
        const file = loc.file_path.toLowerCase();
        if (!line.file || file.endsWith(line.file) || baseName(file).startsWith(line.file))
          offer(4, `line ${baseName(loc.file_path)}:${loc.line}`);
      }
    if ((found.best?.rank ?? Infinity) > 5) {
      if (name.includes(q)) offer(5, "name");
      else if (kernel.includes(q)) offer(5, "kernel");
    }
    if (found.best) out.push(found.best);
  }
  out.sort((a, b) => a.rank - b.rank || a.op.graph_id - b.op.graph_id || a.op.position - b.op.position);
  return out.slice(0, limit);
}
