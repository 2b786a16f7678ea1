"""NaN/Inf seen in calls that never returned: kept by the watchpoint hits that saw them.

A call's kernel traces reach the dump when the call returns (the writer, the ring and the
integrity rules count a call whole). A program paused inside a call by a `nan_or_inf`
watchpoint and then killed (or still paused) has written that call's hit, with the output's
trace (WatchpointHit.trace), and nothing else of it: the hit is then the record of the NaN.
Such an output is an alert like any other ("unfinished": its call has no place in the dump),
so `alerts`, `check` and the dashboard report it instead of calling the run clean.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from tvmdbg_tb.events.health import trace_nonfinite, value_nonfinite_counts
from tvmdbg_tb.events.locations import location
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.summaries import nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb


def _counts(trace: pb.GraphExecutionTrace) -> tuple[int, int, int] | None:
    try:
        counts = nonfinite_counts(trace.tensor_debug_mode, trace.debug_values)
    except (ValueError, OverflowError):
        counts = None
    if counts is None and trace.HasField("tensor_value"):
        counts = value_nonfinite_counts(trace.tensor_value)
    return counts


class _NonfiniteHits:
    """The hits of one run whose trace holds NaN/Inf, found once per hit as hits are read
    (a watchpoint on every op of a model gone NaN makes a hit per kernel per call)."""

    def __init__(self):
        self.source: list | None = None
        self.read = 0
        self.found: list[tuple[float, pb.WatchpointHit]] = []

    def update(self, hits: list) -> list[tuple[float, pb.WatchpointHit]]:
        if hits is not self.source or len(hits) < self.read:  # the graphs file was read again
            self.source, self.read, self.found = hits, 0, []
        for wall_time, hit in hits[self.read :]:
            if hit.HasField("trace") and trace_nonfinite(hit.trace):
                self.found.append((wall_time, hit))
        self.read = len(hits)
        return self.found


_NONFINITE_HITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def unfinished_alerts(run: RunReader) -> list[dict]:
    """The non-finite kernel outputs that only watchpoint hits recorded: their call has no
    Execution record and no trace of that output in the dump. In hit order."""
    with run.lock:
        hits = _NONFINITE_HITS.setdefault(run, _NonfiniteHits()).update(run.watchpoint_hits)
        if not hits:
            return []
        indices = np.array([hit.execution_index for _, hit in hits], dtype=np.int64)
        open_calls = ~np.isin(indices, run.execution_digests()["index"])
        candidates = [hits[k] for k in np.flatnonzero(open_calls).tolist()]
        recorded = set()
        digests = run.trace_digests()
        for e in {int(hit.execution_index) for _, hit in candidates}:
            rows = digests[run.execution_trace_indices(e)]
            recorded.update((e, op, slot) for op, slot in zip(rows["op_id"].tolist(), rows["output_slot"].tolist()))
    rows, seen = [], set()
    for wall_time, hit in candidates:
        key = (int(hit.execution_index), int(hit.op_id), int(hit.output_slot))
        if key in seen or key in recorded:
            continue
        seen.add(key)
        try:
            op = run.op(hit.op_id)
        except KeyError:
            op = None
        counts = _counts(hit.trace) or (-1, -1, -1)
        rows.append(
            {  # an alert object (docs/routes.md#alerts) without a place in the dump
                "alert_type": "InfNanAlert",
                "unfinished": True,
                "op_id": key[1],
                "op_name": hit.op_name,
                "kernel": hit.kernel,
                "graph_id": int(hit.graph_id),
                "output_slot": key[2],
                "nan_count": counts[0],
                "neg_inf_count": counts[1],
                "pos_inf_count": counts[2],
                "size": _size(hit.trace),
                "dtype": hit.trace.dtype or None,
                "shape": [int(d) for d in hit.trace.shape],
                "wall_time": wall_time,
                "execution_index": key[0],
                "trace_index": None,
                "execution_position": None,
                "trace_position": None,
                "origin": None,
                "location": location(run, op.code_location) if op is not None else None,
                "original_ops": [
                    {"op_type": o.op_type, "var_name": o.var_name, "location": location(run, o.code_location)}
                    for o in (op.original_ops if op is not None else ())
                ],
                "watchpoint_id": int(hit.watchpoint_id),
                "detail": hit.detail,
            }
        )
    return rows


def _size(trace: pb.GraphExecutionTrace) -> int | None:
    shape = [int(d) for d in trace.shape]
    return math.prod(shape) if all(d >= 0 for d in shape) else None
