"""The kernels a paused call has run so far, as rows of the dashboard's kernel list.

The dump gets a call's kernel traces when the call returns (a call is one record group:
the writer, the ring and the integrity rules count it whole), so while a program is paused
inside a call, the kernels that call already ran are only in the program's memory. The
controller keeps them here, per thread, for the call running now; at a pause they are what
the `live/paused_call` route lists: the same row shape as `graph_execution/data`, without a
position or index in the dump (it has none yet), and with the kernel's place in the call.
"""

from __future__ import annotations

import math
import threading

from tvmdbg_tb.events.health import value_nonfinite_counts
from tvmdbg_tb.events.modes import mode_name, spec
from tvmdbg_tb.events.summaries import describe, nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb

MAX_PAGE = 10_000  # rows per request, as the plugin's other list routes


class CallSoFar:
    """The traces of the call each thread is running, from its first kernel to the latest."""

    def __init__(self) -> None:
        self._local = threading.local()

    def add(self, execution_index: int, traces: list[pb.GraphExecutionTrace]) -> None:
        """The traces of a kernel that just ran in call `execution_index` (a new index starts a
        new call: a call that raised never ended)."""
        local = self._local
        if getattr(local, "index", None) != execution_index:
            local.index = execution_index
            local.traces = []
        local.traces.extend(traces)

    def current(self) -> list[pb.GraphExecutionTrace]:
        """This thread's call so far (a copy: the list grows while the call runs)."""
        return list(getattr(self._local, "traces", ()))

    def end(self) -> None:
        """This thread's call returned: the dump has its traces now (and a FULL_TENSOR value
        is not held any longer than the call)."""
        self._local.index = None
        self._local.traces = []


def _counts(t: pb.GraphExecutionTrace) -> tuple[int, int, int] | None:
    """(nan, neg_inf, pos_inf) as the reader's digests count them."""
    try:
        counts = nonfinite_counts(t.tensor_debug_mode, t.debug_values)
    except (ValueError, OverflowError):
        counts = None
    if counts is None and spec(t.tensor_debug_mode).values and t.HasField("tensor_value"):
        counts = value_nonfinite_counts(t.tensor_value)
    return counts


def trace_row(t: pb.GraphExecutionTrace, call_position: int) -> dict:
    """One kernel trace of the paused call as a row of the kernel list."""
    counts = _counts(t)
    values = list(t.debug_values)
    duration = t.duration_us
    return {
        "position": None,  # not in the dump yet
        "index": None,
        "call_position": call_position,
        "op_id": int(t.op_id),
        "op_name": t.op_name,
        "kernel": t.kernel,
        "graph_id": int(t.graph_id),
        "output_slot": int(t.output_slot),
        "execution_index": int(t.execution_index),
        "wall_time": None,
        "duration_us": None if math.isnan(duration) else duration,
        "nan": counts[0] if counts else -1,
        "neg_inf": counts[1] if counts else -1,
        "pos_inf": counts[2] if counts else -1,
        "nonfinite": None if counts is None else any(counts),
        "has_error": bool(t.error),
        "tensor_debug_mode": mode_name(t.tensor_debug_mode),
        "debug_values": values,
        "summary": describe(t.tensor_debug_mode, values),
        "dtype": t.dtype,
        "shape": [int(d) for d in t.shape],
        "device": t.device,
        "error": t.error,
        "has_value": t.HasField("tensor_value"),
    }


def page(traces: list[pb.GraphExecutionTrace], begin: int, end: int) -> tuple[int, int, list[dict]]:
    """(begin, end, rows) of a paused call's traces, paged as the plugin's list routes are
    (docs/routes.md): end -1 means to the end, end is clamped, at most MAX_PAGE rows."""
    if begin < 0:
        raise ValueError(f"begin must be >= 0, got {begin}")
    if end < -1 or (end != -1 and end < begin):
        raise ValueError(f"end ({end}) must be -1 or >= begin ({begin})")
    total = len(traces)
    end = total if end == -1 else min(end, total)
    begin = min(begin, end)
    if end - begin > MAX_PAGE:
        raise ValueError(f"page of {end - begin} rows is larger than {MAX_PAGE}; ask for a range with begin and end")
    return begin, end, [trace_row(traces[k], k) for k in range(begin, end)]
