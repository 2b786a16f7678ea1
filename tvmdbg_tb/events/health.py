"""Whether records hold a NaN or an Inf, decided as the reader's digests decide it: a trace's
counts (or its FULL_TENSOR values) and an Execution's output summaries.

The writer asks this of the calls the instrumentation hands it without saying (the
compiled path says it from the counts it computed anyway), to count the calls that went
non-finite and keep the first of them whole in the circular buffer.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tvmdbg_tb.events.modes import Counts, spec
from tvmdbg_tb.events.summaries import ANY_NONFINITE, NONFINITE_AT, nonfinite_counts
from tvmdbg_tb.events.trace_parts import TraceParts
from tvmdbg_tb.events.values import BadValue, flat_values
from tvmdbg_tb.proto import debug_event_pb2 as pb


def value_nonfinite_counts(value: pb.TensorValue) -> tuple[int, int, int] | None:
    """(nan, neg_inf, pos_inf) of a stored FULL_TENSOR value; None when its dtype is unknown."""
    try:
        array = flat_values(value)
    except BadValue:
        return None
    if array.dtype.kind != "f":
        return (0, 0, 0)
    return int(np.isnan(array).sum()), int(np.isneginf(array).sum()), int(np.isposinf(array).sum())


def _summary_nonfinite(mode: int, values, value: pb.TensorValue | None) -> bool:
    try:
        counts = nonfinite_counts(mode, values)
    except (ValueError, OverflowError):  # a NaN count: the summary says nothing
        counts = None
    if counts is None and value is not None:
        counts = value_nonfinite_counts(value)
    return counts is not None and any(counts)


def trace_nonfinite(trace: pb.GraphExecutionTrace) -> bool:
    """Whether the trace's output holds a NaN or an Inf, or its kernel's fused ops made one
    that the output hides (inner_nonfinite: the call holds an alert all the same)."""
    if len(trace.inner_nonfinite):
        return True
    value = trace.tensor_value if trace.HasField("tensor_value") else None
    return _summary_nonfinite(trace.tensor_debug_mode, trace.debug_values, value)


def execution_nonfinite(execution: pb.Execution) -> bool:
    """Whether an output summary of the call counted a NaN or an Inf (as the reader's
    execution digests: inputs do not count, a tuple counts by its totals)."""
    return any(_summary_nonfinite(execution.tensor_debug_mode, s.debug_values, None) for s in execution.outputs)


def parts_nonfinite(mode: int, parts: TraceParts) -> bool | None:
    """Whether traces given as parts hold a NaN or an Inf, read from their tails (each: the
    packed debug_values field, then duration_us) without building a message; None when the
    tails hold no counts this way."""
    count = (parts.width - 11) // 8  # tag and length, 8 bytes a value, duration's 9 bytes
    layout = _NONFINITE_AT.get(mode)
    if layout is None or count < layout[0] or parts.width != 11 + 8 * count or not len(parts):
        return None
    tails = np.ndarray((len(parts), count), "<f8", parts.tails, 2, (parts.width, 8))
    values = tails[:, layout[1]]
    if spec(mode).counts is not Counts.ANY:  # a count that is not a number says nothing (summaries.nonfinite_counts)
        values = np.where(np.isfinite(values), values, 0.0)
    return bool((values != 0).any())


# The values a mode's counts need, and where its nan, -inf, +inf (CURT_HEALTH: any) are.
_NONFINITE_AT = {value: (need, list(where)) for value, (need, *where) in NONFINITE_AT.items()}
_NONFINITE_AT.update(dict.fromkeys(ANY_NONFINITE, (1, [0])))


def call_nonfinite(
    mode: int, execution: pb.Execution | bytes | None, traces: Iterable[pb.GraphExecutionTrace | bytes]
) -> bool | None:
    """Whether a call's records (its Execution, serialized or not, and its traces, messages,
    serialized payloads or TraceParts) hold a NaN or an Inf; None when mode records no health."""
    if not spec(mode).knows_finite:
        return None
    found = parts_nonfinite(mode, traces) if type(traces) is TraceParts else None
    if found:
        return True
    for trace in traces if found is None else ():
        if type(trace) is bytes:
            trace = pb.GraphExecutionTrace.FromString(trace)
        if trace_nonfinite(trace):
            return True
    if type(execution) is bytes:
        execution = pb.Execution.FromString(execution)
    return execution is not None and execution_nonfinite(execution)
