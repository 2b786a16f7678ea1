"""JSON views of a run's records (the row and object shapes of docs/routes.md).

Light rows come from the reader's numpy digests; full rows parse one record each by offset.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from tvmdbg_tb.analysis.alerts import alerts, monitor
from tvmdbg_tb.analysis.jsonable import num
from tvmdbg_tb.analysis.ranges import num_range_alerts
from tvmdbg_tb.analysis.tensor_value import value_health
from tvmdbg_tb.events.locations import location, original_ops
from tvmdbg_tb.events.modes import mode_name, spec
from tvmdbg_tb.events.reader import HAS_ERROR, HEALTH_KNOWN, NONFINITE, RunReader
from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb

LIVE_SECONDS = 30.0
# DebuggedGraph.instrumentation of a PyTorch eager reference run (tvmdbg.record_torch_reference).
TORCH_REFERENCE = "torch_eager"
_INPUT_KINDS = {v: k for k, v in pb.OpInput.Kind.items()}


def spec_json(spec: pb.TensorSpec) -> dict:
    return {"dtype": spec.dtype, "shape": [int(d) for d in spec.shape], "shape_expr": spec.shape_expr}


def _summary(mode: int, summary: pb.TensorSummary) -> dict:
    values = list(summary.debug_values)
    return {
        "dtype": summary.dtype,
        "shape": [int(d) for d in summary.shape],
        "debug_values": values,
        "summary": _described(mode, values, summary),
        "has_value": summary.HasField("tensor_value"),
        "items": [_summary(mode, item) for item in summary.items],
    }


def _described(mode: int, values: list[float], holder) -> dict:
    """describe(), or for a FULL_TENSOR value the counts of its stored elements."""
    if spec(mode).values and holder.HasField("tensor_value"):
        return value_health(holder.tensor_value)
    return describe(mode, values)


def _nonfinite(flags: int) -> bool | None:
    return bool(flags & NONFINITE) if flags & HEALTH_KNOWN else None


# -- runs ----------------------------------------------------------------------------------


def last_update_time(run: RunReader) -> float | None:
    """Newest modification time of the run's record files."""
    if run.segmented:  # on an object store: its newest segment's
        return run.last_growth() or None
    newest = None
    try:
        entries = list(os.scandir(run.path))
    except OSError:
        return None
    for entry in entries:
        if entry.name.startswith("tvmdbg."):
            try:
                mtime = entry.stat().st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return newest


def _with_masked_alerts(run: RunReader) -> dict:
    """num_alerts/first_origin_alert counting NaN/Inf hidden inside fused kernels (replays)."""
    if not run.replays():
        return {}
    page = alerts(run, 0, 0)
    return {"num_alerts": page["num_alerts"], "first_origin_alert": page["first_origin_index"]}


def is_live(completeness_state, updated: float | None, now: float | None = None) -> bool:
    """Whether the run's program is still writing: its writer has not ended (no RunEnd) and
    runs on this host, or (written elsewhere, so its process cannot be seen) its files grew
    within LIVE_SECONDS. A program that exits shows as not live at the next poll."""
    now = time.time() if now is None else now
    if completeness_state.ended != "running":
        return False
    if completeness_state.writer_alive is not None:
        return completeness_state.writer_alive
    return updated is not None and now - updated < LIVE_SECONDS


def run_info(run: RunReader) -> dict:
    """One entry of the `runs` route."""
    meta = run.metadata
    run_alerts = monitor(run)
    updated = last_update_time(run)
    completeness = run.completeness()
    return {
        "run": run.name,
        "run_name": (meta.run_name or None) if meta else None,
        "run_id": meta.run_id if meta else None,
        "host_name": meta.host_name if meta else None,
        "pid": int(meta.pid) if meta else None,
        "tvm_version": meta.tvm_version if meta else None,
        "tvmdbg_version": meta.tvmdbg_version if meta else None,
        "tensor_debug_mode": mode_name(meta.tensor_debug_mode) if meta else None,
        "circular_buffer_size": int(meta.circular_buffer_size) if meta else None,
        "argv": list(meta.argv) if meta else [],
        "start_time": run.metadata_wall_time if meta else None,
        "num_executions": run.num_executions(),
        "num_traces": run.num_traces(),
        "num_graphs": len(run.graphs()),
        "reference": any(g.instrumentation == TORCH_REFERENCE for g in run.graphs()),
        "num_ops": len(run.ops()),
        "num_alerts": run_alerts.num_alerts(),
        "first_origin_alert": run_alerts.first_origin_index(),
        **_with_masked_alerts(run),
        "num_range_alerts": num_range_alerts(run),
        "num_corruptions": len(run.corruptions),
        "last_update_time": updated,
        "live": is_live(completeness, updated),
        "completeness": completeness.to_json(),
        "disco": (
            {"job_id": run.disco.job_id, "rank": int(run.disco.rank), "world_size": int(run.disco.world_size)}
            if run.disco is not None
            else None
        ),
    }


# -- executions ----------------------------------------------------------------------------


def execution_digests(run: RunReader, begin: int, end: int) -> list[dict]:
    return execution_rows(run, np.arange(len(run.execution_digests()), dtype=np.int64)[begin:end])


def calls_of(run: RunReader, function: str, call: int | None = None) -> np.ndarray:
    """The positions of the executions of `function` (by name), the `call`-th of their VM's
    (Execution.call_number: a loop's step) when given: what "go to decode step 14" finds."""
    digests = run.execution_digests()
    if function not in run.function_names:
        return np.zeros(0, dtype=np.int64)
    wanted = digests["function"] == run.function_names.index(function)
    if call is not None:
        wanted &= digests["call_number"] == call
    return np.flatnonzero(wanted)


def execution_rows(run: RunReader, positions: np.ndarray) -> list[dict]:
    """The digest rows (docs/routes.md#executiondigests) of the executions at these positions."""
    positions = np.asarray(positions, dtype=np.int64)
    rows = run.execution_digests()[positions]
    names = run.function_names
    return [
        {
            "position": int(position),
            "index": int(r["index"]),
            "function_name": names[int(r["function"])],
            # The how-manieth call of the function by its VM (a loop's step; 0: not recorded).
            "call_number": int(r["call_number"]),
            "vm": int(r["vm"]),
            "graph_id": int(r["graph_id"]),
            "wall_time": float(r["wall_time"]),
            "duration_us": num(r["duration_us"]),
            "num_traces": int(r["num_traces"]),
            "has_error": bool(r["flags"] & HAS_ERROR),
            "nonfinite": _nonfinite(int(r["flags"])),
        }
        for position, r in zip(positions.tolist(), rows)
    ]


def execution_data(run: RunReader, begin: int, end: int) -> list[dict]:
    out = []
    rows = execution_digests(run, begin, end)
    wanted = np.array([r["index"] for r in rows], dtype=np.int64)
    with run.lock:  # the tally and the digests it counts, from one state
        firsts = run.trace_tally().first_trace_positions(wanted).tolist()
    first_trace = {e: p for e, p in zip(wanted.tolist(), firsts) if p >= 0}
    for row in rows:
        try:
            e = run.execution(row["position"])
        except LookupError as error:  # as in trace_data: the row says so, the page is served
            row["unreadable"] = str(error)
            out.append(row)
            continue
        row.update(
            {
                "executable_id": e.executable_id,
                "tensor_debug_mode": mode_name(e.tensor_debug_mode),
                "error": e.error,
                "inputs": [_summary(e.tensor_debug_mode, s) for s in e.inputs],
                "outputs": [_summary(e.tensor_debug_mode, s) for s in e.outputs],
                "location": location(run, e.code_location),
                "stack_frame_ids": [int(i) for i in e.code_location.stack_frame_ids],
                "first_trace_position": first_trace.get(int(e.index)),
            }
        )
        out.append(row)
    return out


# -- traces --------------------------------------------------------------------------------


def trace_digests(run: RunReader, positions: np.ndarray) -> list[dict]:
    """Digest rows of the traces at the given positions."""
    positions = np.asarray(positions, dtype=np.int64)
    digests = run.trace_digests()[positions]
    c = {name: digests[name].tolist() for name in digests.dtype.names}
    ops: dict[int, tuple] = {}
    out = []
    for i, position in enumerate(positions.tolist()):
        op_id = c["op_id"][i]
        if op_id not in ops:
            try:
                op = run.op(op_id)
                ops[op_id] = (op.op_name, op.kernel, int(op.graph_id))
            except KeyError:
                ops[op_id] = (None, None, None)
        op_name, kernel, graph_id = ops[op_id]
        flags = c["flags"][i]
        out.append(
            {
                "position": position,
                "index": c["index"][i],
                "op_id": op_id,
                "op_name": op_name,
                "kernel": kernel,
                "graph_id": graph_id,
                "output_slot": c["output_slot"][i],
                "execution_index": c["execution_index"][i],
                "wall_time": c["wall_time"][i],
                "duration_us": num(c["duration_us"][i]),
                "nan": c["nan"][i],
                "neg_inf": c["neg_inf"][i],
                "pos_inf": c["pos_inf"][i],
                "nonfinite": _nonfinite(flags),
                "has_error": bool(flags & HAS_ERROR),
            }
        )
    return out


def trace_data(run: RunReader, positions: np.ndarray) -> list[dict]:
    """Full rows (digest + decoded summary) of the traces at the given positions."""
    out = trace_digests(run, positions)
    for row in out:
        try:
            t = run.trace(row["position"])
        except LookupError as error:  # gone since it was indexed (a ring compaction), or damaged:
            row["unreadable"] = str(error)  # that row says so, the page is served
            continue
        values = list(t.debug_values)
        if row["op_name"] is None:
            row.update(op_name=t.op_name, kernel=t.kernel, graph_id=int(t.graph_id))
        row.update(
            {
                "tensor_debug_mode": mode_name(t.tensor_debug_mode),
                "debug_values": values,
                "summary": _described(t.tensor_debug_mode, values, t),
                "dtype": t.dtype,
                "shape": [int(d) for d in t.shape],
                "device": t.device,
                "error": t.error,
                "has_value": t.HasField("tensor_value"),
            }
        )
    return out


# -- graphs and ops ------------------------------------------------------------------------


def op_json(run: RunReader, op: pb.GraphOpCreation) -> dict:
    return {
        "op_id": int(op.op_id),
        "graph_id": int(op.graph_id),
        "op_name": op.op_name,
        "kernel": op.kernel,
        "call_type": op.call_type,
        "position": int(op.position),
        "device": op.device,
        "location": location(run, op.code_location),
        "stack_frame_ids": [int(i) for i in op.code_location.stack_frame_ids],
        "original_ops": original_ops(run, op),
        "outputs": [
            {"name": op.output_names[i] if i < len(op.output_names) else "", **spec_json(s)}
            for i, s in enumerate(op.outputs)
        ],
    }


def graph_json(run: RunReader, graph: pb.DebuggedGraph) -> dict:
    return {
        "graph_id": int(graph.graph_id),
        "name": graph.name,
        "executable_id": graph.executable_id,
        "source_mapped": graph.source_mapped,
        "instrumentation": graph.instrumentation,
        "target": graph.target,
        "note": graph.note,
        "location": location(run, graph.code_location),
    }


def graphs_list(run: RunReader) -> list[dict]:
    return [{**graph_json(run, g), "num_ops": len(run.ops(g.graph_id))} for g in run.graphs()]


def edge_json(op: pb.GraphOpCreation, slot: int, inp: pb.OpInput) -> dict:
    """One edge of graphs/graph_info: input `slot` of op, from an op, a parameter or a constant."""
    is_op = inp.kind == pb.OpInput.OP_OUTPUT
    return {
        "src_op_id": int(inp.producer_op_id) if is_op else None,
        "src_output_slot": int(inp.producer_output_slot) if is_op else 0,
        "dst_op_id": int(op.op_id),
        "dst_input_slot": slot,
        "kind": _INPUT_KINDS.get(inp.kind, "OTHER"),
        "name": inp.name,
        "param_index": int(inp.param_index) if inp.kind == pb.OpInput.PARAM else None,
        "tuple_item": int(inp.tuple_item) if inp.HasField("tuple_item") else None,
    }


def execution_inputs(run: RunReader, execution_index: int) -> list[dict] | None:
    """The input summaries of the call with that index (the health of the function's
    parameters in it), or None when the dump does not hold it."""
    with run.lock:
        found = np.flatnonzero(run.execution_digests()["index"] == execution_index)
        if not len(found):
            return None
        e = run.execution(int(found[0]))
    return [_summary(e.tensor_debug_mode, s) for s in e.inputs]


def resolve_op(run: RunReader, op_id: int | None, graph_id: int | None, op_name: str | None) -> pb.GraphOpCreation:
    """The op named by id, or by (graph_id, op_name); KeyError when there is none."""
    if op_id is not None:
        return run.op(op_id)
    for op in run.ops(graph_id):
        if op.op_name == op_name:
            return op
    raise KeyError(f"no op {op_name!r} in graph {graph_id} of run {run.name!r}")


def _op_name(run: RunReader, op_id: int) -> str | None:
    try:
        return run.op(op_id).op_name
    except KeyError:
        return None


MAX_CONSUMERS = 1_000  # consumers listed by op_info (an op may feed every layer)


def op_info(run: RunReader, op: pb.GraphOpCreation, execution_index: int | None = None) -> dict:
    """One op with its inputs' producers, consumers (the first MAX_CONSUMERS) and latest
    summaries; with execution_index, the output-0 trace of each producer and consumer in that
    call (`health`, by op id): their health where the op ran."""
    inputs = []
    for slot, inp in enumerate(op.inputs):
        is_op = inp.kind == pb.OpInput.OP_OUTPUT
        inputs.append(
            {
                "slot": slot,
                "kind": _INPUT_KINDS.get(inp.kind, "OTHER"),
                "name": inp.name,
                **spec_json(inp.spec),
                "producer_op_id": int(inp.producer_op_id) if is_op else None,
                "producer_op_name": _op_name(run, inp.producer_op_id) if is_op else None,
                "producer_output_slot": int(inp.producer_output_slot) if is_op else None,
                "param_index": int(inp.param_index) if inp.kind == pb.OpInput.PARAM else None,
                "tuple_item": int(inp.tuple_item) if inp.HasField("tuple_item") else None,
            }
        )
    uses = run.consumers(op.op_id)
    consumers = [
        {"op_id": c, "op_name": _op_name(run, c), "input_slot": s, "output_slot": o} for c, s, o in uses[:MAX_CONSUMERS]
    ]
    positions = run.op_trace_indices(op.op_id)
    slots = run.trace_digests()["output_slot"][positions]
    latest = [int(positions[np.flatnonzero(slots == s)[-1]]) for s in np.unique(slots)]
    out = {
        **op_json(run, op),
        "inputs": inputs,
        "consumers": consumers,
        "num_consumers": len(uses),
        "num_traces": int(len(positions)),
        "latest": trace_data(run, np.array(latest, dtype=np.int64)),
    }
    if execution_index is not None:
        related = {i["producer_op_id"] for i in inputs if i["producer_op_id"] is not None}
        related.update(c["op_id"] for c in consumers)
        related.add(int(op.op_id))
        found = slot0_positions(run, execution_index, related)
        rows = trace_data(run, np.array(list(found.values()), dtype=np.int64))
        out["execution_index"] = execution_index
        out["health"] = {str(r["op_id"]): r for r in rows}
    return out


def slot0_positions(run: RunReader, execution_index: int, op_ids) -> dict[int, int]:
    """op id -> position of its output-0 trace in that call, for the given ops (those traced)."""
    positions = run.execution_trace_indices(execution_index)
    digests = run.trace_digests()[positions]
    wanted = np.isin(digests["op_id"], np.fromiter(op_ids, dtype=np.int64)) & (digests["output_slot"] == 0)
    out: dict[int, int] = {}
    for op_id, position in zip(digests["op_id"][wanted].tolist(), positions[wanted].tolist()):
        out.setdefault(op_id, position)
    return out


# -- source --------------------------------------------------------------------------------


def source_files_list(run: RunReader) -> list[dict]:
    return [
        {"index": i, "host_name": host, "file_path": path, "num_lines": lines}
        for i, (host, path, lines) in enumerate(run.source_file_heads())
    ]


# A source page's bounds: lines are cut at MAX_LINE_CHARS and a page ends before its lines pass
# MAX_PAGE_CHARS of JSON, so an 8 MiB one-line file costs what a page of short lines does.
MAX_SOURCE_PAGE = 10_000  # lines
MAX_LINE_CHARS = 10_000
MAX_PAGE_CHARS = 1 << 20


def source_file(run: RunReader, index: int, begin: int = 0, end: int | None = None) -> dict:
    """Lines [begin, end) of a recorded source file (positions: line n is position n - 1; end
    None: to the end), each cut at MAX_LINE_CHARS (`clipped` names those lines and their
    length), the page ending early, at `end`, once its text passes MAX_PAGE_CHARS of JSON.
    KeyError when there is no such file."""
    f = run.source_file(index)
    total = len(f.lines)
    end = total if end is None else min(end, total)
    begin = min(begin, end)
    lines: list[str] = []
    clipped = []
    size = 0
    for position in range(begin, end):
        line = f.lines[position]
        shown = line[:MAX_LINE_CHARS]
        size += len(json.dumps(shown))
        if lines and size > MAX_PAGE_CHARS:
            break
        lines.append(shown)
        if len(shown) < len(line):
            clipped.append({"line": position + 1, "length": len(line)})
    return {
        "index": index,
        "host_name": f.host_name,
        "file_path": f.file_path,
        "num_lines": total,
        "begin": begin,
        "end": begin + len(lines),
        "lines": lines,
        "clipped": clipped,
    }


def stack_frames(run: RunReader, ids: list[int]) -> list[dict]:
    """The frames with the given ids (KeyError on an unknown id)."""
    out = []
    for i in ids:
        f = run.stack_frame(i)
        out.append(
            {
                "id": int(f.id),
                "file_path": f.file_path,
                "file_index": int(f.file_index),
                "line": int(f.line),
                "function": f.function,
            }
        )
    return out
