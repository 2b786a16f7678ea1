"""The compiled tracer's steady-state VM call in C++ (native_call.cc).

Why: once the kernels run at their floor, a traced call of a training step paid more for the
Python glue around them than for them: the wrapper and the tracer's call, the call-point lookup, the
call's bookkeeping, reading the stats buffer, building the Execution's bytes and queueing
the records, each step slowed by kernels that evicted the interpreter's caches. The
CPython type here does that glue for the common call (one stats buffer, rows and Execution
complete and finite) in one C function: the same caches (call point -> CodeLocation bytes,
function -> native_rows.call_rows arguments, or the plans call_plans.py learned for a
function that takes or returns objects, weights summarised once per value or symbolic
shapes), the same bytes, the same writer call (native_records.queue_call, which
DebugEventsWriter.write_call makes too, called through its C entry native_records.QUEUE_CALL:
no Python object made for a call's records). Everything else
it hands to CompiledTracer's Python path, which stays the reference: nested and time_evaluator calls, first sight of a call point or
argument count, failing calls, several buffers, a first non-finite row (the replay), sinks
other than the writer.

Built by tvmdbg_tb.native in a background thread when a compiled tracer starts; until then,
and without a compiler or with TVMDBG_NATIVE_CALL=0, vm[name] returns the Python path.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tvmdbg_tb.capture import compiled
from tvmdbg_tb.native import TvmPythonExtension, source

ENV_SWITCH = "TVMDBG_NATIVE_CALL"  # "0": the Python call path

LIBRARY = TvmPythonExtension(source("native_call.cc"), ENV_SWITCH, "native VM call path")


class NativePlan(NamedTuple):
    """How native_call records one kind of call (native_call.cc PlanFrom reads it by position,
    and hands the very object back to CompiledTracer._native_finish): the traces' statics and
    width, native_rows.call_rows' tails, summaries and scan, the Execution's constant bytes,
    and the guard of a plan call_plans.py learned (None: a function's static plan)."""

    statics: Any
    width: int
    tails: tuple
    summaries: tuple | None
    execution: bytes | None
    scan: tuple | None
    guard: tuple | None


def native_plan(parts: Any, function: Any, rate: Any, summaries, execution, guard=None) -> NativePlan:
    """The NativePlan of a compiled function's (compiled.FUNCTIONS) calls whose traces follow
    parts (fast_tracer's parts plan) at the tracer's sampling rate."""
    tails = (parts.rows, compiled.ROW_WIDTH, parts.traced, parts.count, parts.codes, compiled.STATS_COLUMN, rate)
    scan = (len(function.rows) + 1, compiled.ROW_WIDTH, function.hunt_mask) if function.health else None
    return NativePlan(parts.statics, parts.width, tails, summaries, execution, scan, guard)
