"""The compiled tracer's steady-state VM call in C++ (native_call.cc).

Why: once the kernels run at their floor, a traced call of a training step paid more for the
Python glue around them than for them: the wrapper and the tracer's call, the call-point lookup, the
call's bookkeeping, reading the stats buffer, building the Execution's bytes and queueing
the records, each step slowed by kernels that evicted the interpreter's caches. The
CPython type here does that glue for the common call (one stats buffer, rows and Execution
complete and finite) in one C function: the same caches (call point -> CodeLocation bytes,
function -> native_rows.call_rows arguments, or the plans call_plans.py learned for a
function that takes or returns objects, weights summarised once per value or symbolic
shapes), the same bytes, the same writer call (native_records.queue_call, which DebugEventsWriter.write_call makes too). Everything else
it hands to CompiledTracer's Python path, which stays the reference: nested and time_evaluator calls, first sight of a call point or
argument count, failing calls, several buffers, a first non-finite row (the replay), sinks
other than the writer.

Built by tvmdbg_tb.native in a background thread when a compiled tracer starts; until then,
and without a compiler or with TVMDBG_NATIVE_CALL=0, vm[name] returns the Python path.
"""

from __future__ import annotations

from tvmdbg_tb.native import TvmPythonExtension, source

ENV_SWITCH = "TVMDBG_NATIVE_CALL"  # "0": the Python call path

LIBRARY = TvmPythonExtension(source("native_call.cc"), ENV_SWITCH, "native VM call path")
