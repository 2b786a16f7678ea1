"""Big graphs in bounded answers (docs/routes.md#graphs): a page of a function's ops, the
neighbourhood of one op (what the dashboard lays out around a selection), a collapsed
overview (consecutive ops folded into at most N groups, with the edges between groups), and
a search over every op by name, kernel, Relax op type, model node or source line. Each answer
is bounded by its parameters whatever the graph's size; the per-run OpIndex makes them cheap."""

from __future__ import annotations

import collections
import re

import numpy as np

from tvmdbg_tb.analysis.graph_index import GraphOrder, OpIndex, base_name, op_index
from tvmdbg_tb.analysis.views import (
    edge_json,
    execution_inputs,
    graph_json,
    op_json,
    slot0_positions,
    spec_json,
    trace_data,
)
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb

MAX_GRAPH_PAGE = 5_000  # ops per graph_info page
MAX_NEIGHBORHOOD_OPS = 2_000
MAX_DEPTH = 1_000
MAX_GROUPS = 1_000
MAX_SEARCH_RESULTS = 200
GROUP_OP_TYPES = 3  # op types named per overview group


def _params(graph: pb.DebuggedGraph) -> list[dict]:
    return [
        {"index": i, "name": graph.param_names[i] if i < len(graph.param_names) else "", **spec_json(s)}
        for i, s in enumerate(graph.params)
    ]


def graph_page(run: RunReader, graph_id: int, begin: int, end: int) -> dict:
    """graphs/graph_info: ops [begin, end) of a function in call order and the edges into them
    (KeyError for an unknown graph)."""
    graph = run.graph(graph_id)
    ops = run.ops(graph_id)[begin:end]
    edges = [edge_json(op, slot, inp) for op in ops for slot, inp in enumerate(op.inputs)]
    return {
        **graph_json(run, graph),
        "num_ops": len(run.ops(graph_id)),
        "begin": begin,
        "end": begin + len(ops),
        "params": _params(graph),
        "ops": [op_json(run, op) for op in ops],
        "edges": edges,
    }


def num_ops(run: RunReader, graph_id: int) -> int:
    run.graph(graph_id)  # KeyError for an unknown graph
    return len(run.ops(graph_id))


def _walk(order: GraphOrder, center: int, depth: int, max_ops: int) -> tuple[list[int], list[int]]:
    """Breadth-first from position center over producers then consumers: positions in the order
    found and each one's distance (the dashboard's neighbourhood rule, kept here for every client)."""
    distance = {center: 0}
    found = [center]
    layer = [center]
    for d in range(1, depth + 1):
        if not layer or len(found) >= max_ops:
            break
        nxt = []
        for p in layer:
            for n in order.neighbours(p):
                if n in distance or len(found) >= max_ops:
                    continue
                distance[n] = d
                found.append(n)
                nxt.append(n)
        layer = nxt
    return found, [distance[p] for p in found]


def neighborhood(run: RunReader, op_id: int, depth: int, max_ops: int, execution_index: int | None) -> dict:
    """graphs/neighborhood: the ops within `depth` edges of op_id (at most max_ops, nearest
    first), the edges into them, which of them have neighbours left out, the parameters they
    read and, for a call, their health in it. A graph of at most max_ops ops is answered whole
    (its unconnected ops too). KeyError for an unknown op."""
    op = run.op(op_id)
    graph_id = int(op.graph_id)
    graph = run.graph(graph_id)
    index = op_index(run)
    calls = index.graphs[graph_id]
    whole = len(calls.op_ids) <= max_ops
    found, distances = _walk(calls, index.place(op_id)[1], MAX_DEPTH if whole else depth, max_ops)
    if whole:  # unconnected ops last, in call order
        reached = set(found)
        found += [p for p in range(len(calls.op_ids)) if p not in reached]
    shown_positions = set(found)
    frontier = [int(calls.op_ids[p]) for p in found if any(n not in shown_positions for n in calls.neighbours(p))]
    order = calls.op_ids[found].tolist()
    distance = dict(zip(order, distances))
    shown = set(order)
    ops = [run.op(i) for i in order]
    edges = [edge_json(o, slot, inp) for o in ops for slot, inp in enumerate(o.inputs)]
    edges = [e for e in edges if e["src_op_id"] is None or e["src_op_id"] in shown]
    read = {e["param_index"] for e in edges if e["param_index"] is not None}
    params = [p for p in _params(graph) if p["index"] in read]
    rows = [{**op_json(run, o), "distance": distance.get(int(o.op_id))} for o in ops]
    return {
        **graph_json(run, graph),
        "num_ops": len(calls.op_ids),
        "center": op_id,
        "whole": whole,
        "depth": depth,
        "ops": rows,
        "edges": edges,
        "frontier": frontier,
        "params": params,
        **_call_health(run, execution_index, order, read),
    }


def _call_health(run: RunReader, execution_index: int | None, op_ids, params) -> dict:
    """{"execution_index", "health": {op id: trace row}, "param_health": {index: Summary}}
    for a call (empty without one): what colours the drawn nodes."""
    if execution_index is None:
        return {}
    with run.lock:
        found = slot0_positions(run, execution_index, op_ids)
        rows = trace_data(run, np.array(list(found.values()), dtype=np.int64))
    inputs = execution_inputs(run, execution_index)
    return {
        "execution_index": execution_index,
        "health": {str(r["op_id"]): r for r in rows},
        "param_health": {str(i): inputs[i] for i in sorted(params) if inputs is not None and i < len(inputs)},
    }


def overview(run: RunReader, graph_id: int, begin: int, end: int, max_groups: int, execution_index: int | None) -> dict:
    """graphs/overview: ops [begin, end) of a function folded into at most max_groups groups of
    consecutive ops in call order, each named by its ops' commonest Relax op types and first
    and last line, with the number of op-to-op edges between groups (and, for a call, how many
    of each group's ops output NaN/Inf). KeyError for an unknown graph."""
    graph = run.graph(graph_id)
    index = op_index(run)
    order = index.graphs[graph_id]
    total = len(order.op_ids)
    end = min(end, total)
    begin = min(begin, end)
    n = end - begin
    size = max(1, -(-n // max_groups)) if n else 1
    groups = [_group(run, index, graph_id, k, b, min(b + size, end)) for k, b in enumerate(range(begin, end, size))]
    inside = (order.src >= begin) & (order.src < end) & (order.dst >= begin) & (order.dst < end)
    gs = (order.src[inside] - begin) // size
    gd = (order.dst[inside] - begin) // size
    across = gs != gd
    pairs, counts = np.unique(np.stack([gs[across], gd[across]]), axis=1, return_counts=True)
    edges = [{"src": int(s), "dst": int(d), "count": int(c)} for (s, d), c in zip(pairs.T.tolist(), counts.tolist())]
    answer = {
        **graph_json(run, graph),
        "num_ops": total,
        "begin": begin,
        "end": end,
        "group_size": size,
        "groups": groups,
        "edges": edges,
    }
    if execution_index is not None:
        _overview_health(run, execution_index, order.op_ids, begin, end, size, groups)
        answer["execution_index"] = execution_index
    return answer


def _group(run: RunReader, index: OpIndex, graph_id: int, k: int, begin: int, end: int) -> dict:
    """Group k: the ops at positions [begin, end) of the graph."""
    first = index.first[graph_id]
    types: collections.Counter[str] = collections.Counter()
    for i in range(first + begin, first + end):
        types.update(index.op_types[i] or (index.kernels[i],))
    ends = [op_json(run, run.op(index.search_ids[first + p])) for p in (begin, end - 1)]
    return {
        "index": k,
        "begin": begin,
        "end": end,
        "num_ops": end - begin,
        "first_op": {key: ends[0][key] for key in ("op_id", "op_name", "kernel")},
        "last_op": {key: ends[1][key] for key in ("op_id", "op_name", "kernel")},
        "op_types": [{"op_type": t, "count": c} for t, c in types.most_common(GROUP_OP_TYPES)],
        "first_location": ends[0]["location"],
        "last_location": ends[1]["location"],
    }


def _overview_health(run, execution_index, op_ids, begin, end, size, groups) -> None:
    with run.lock:
        positions = run.execution_trace_indices(execution_index)
        digests = run.trace_digests()[positions]
    bad = np.unique(digests["op_id"][(digests["nan"] > 0) | (digests["neg_inf"] > 0) | (digests["pos_inf"] > 0)])
    traced = np.unique(digests["op_id"])
    span = op_ids[begin:end]
    group_of = np.arange(len(span)) // size
    for key, ids in (("nonfinite_ops", bad), ("traced_ops", traced)):
        counts = np.bincount(group_of[np.isin(span, ids)], minlength=len(groups))
        for g, c in zip(groups, counts.tolist()):
            g[key] = c


_LINE_QUERY = re.compile(r"^(.*?):?(\d+)$")


def _parse_line(q: str) -> tuple[str, int] | None:
    """ "file.py:33", ":33", "33" -> (file part or "", 33); None when the query is no line."""
    m = _LINE_QUERY.match(q)
    if not m or (m.group(1) and ":" not in q):  # "lv33" is a name, not a line
        return None
    return m.group(1), int(m.group(2))


def _rank(index: OpIndex, k: int, q: str, bare: str, line: tuple[str, int] | None) -> tuple[int, str] | None:
    """The best (rank, why) of op k of the index for a query (lower is better), or None."""
    best: tuple[int, str] | None = None

    def offer(rank: int, why: str) -> None:
        nonlocal best
        if best is None or rank < best[0]:
            best = (rank, why)

    name, kernel = index.names[k], index.kernels[k]
    if name == q:
        offer(0, "name")
    elif name.startswith(q):
        offer(1, "name")
    if kernel == q:
        offer(2, "kernel")
    for op_type in index.op_types[k]:
        low = op_type.lower()
        short = low[6:] if low.startswith("relax.") else low
        if low == q or short == bare:
            offer(3, f"op type {op_type}")
        elif len(bare) >= 3 and bare in short:
            offer(6, f"op type {op_type}")
    for node in index.nodes[k]:
        low = node.lower()
        if low == q or (len(q) >= 3 and q in low):
            offer(2 if low == q else 6, f"node {node}")
    if line is not None:
        for path, at in index.lines[k]:
            low = path.lower()
            if at == line[1] and (not line[0] or low.endswith(line[0]) or base_name(low).startswith(line[0])):
                offer(4, f"line {base_name(path)}:{at}")
    if best is None or best[0] > 5:
        if q in name:
            offer(5, "name")
        elif q in kernel:
            offer(5, "kernel")
    return best


def search(run: RunReader, query: str, limit: int, graph_id: int | None = None) -> dict:
    """graphs/search: the ops matching query (case-insensitive) by name (exact, prefix, part),
    kernel, Relax op type (relax.log or log), model node or source line (model.py:33, :33),
    best first (then by function and call order), at most `limit`, and how many matched."""
    q = query.strip().lower()
    index = op_index(run)
    found: list[tuple[int, int, int, int, str]] = []
    if q:
        line = _parse_line(q)
        bare = q[6:] if q.startswith("relax.") else q
        for k, op_id in enumerate(index.search_ids):
            best = _rank(index, k, q, bare, line)
            if best is None:
                continue
            graph, position = index.place(op_id)
            if graph_id is None or graph == graph_id:
                found.append((best[0], graph, position, op_id, best[1]))
    found.sort(key=lambda f: f[:3])
    names = {int(g.graph_id): g.name for g in run.graphs()}
    return {
        "query": query,
        "num_matches": len(found),
        "matches": [
            {"op": op_json(run, run.op(op_id)), "graph_name": names.get(graph, ""), "why": why, "rank": rank}
            for rank, graph, _, op_id, why in found[:limit]
        ],
    }


MAX_OPS_PER_LINE = 20


def op_lines(run: RunReader, index: int, begin: int, end: int) -> dict:
    """source_files/op_lines: the ops created at lines [begin, end) (positions, as in
    source_files/file) of a recorded file: per line with ops, how many and the first
    MAX_OPS_PER_LINE of them in call order. KeyError when there is no such file."""
    f = run.source_file(index)
    end = min(end, len(f.lines))
    begin = min(begin, end)
    out = []
    for line, ids in op_index(run).ops_at(f.file_path, begin + 1, end):
        ops = [run.op(i) for i in ids[:MAX_OPS_PER_LINE]]
        out.append(
            {
                "line": line,
                "num_ops": len(ids),
                "ops": [
                    {"op_id": int(o.op_id), "op_name": o.op_name, "kernel": o.kernel, "graph_id": int(o.graph_id)}
                    for o in ops
                ],
            }
        )
    return {"index": index, "file_path": f.file_path, "begin": begin, "end": end, "lines": out}
