"""Run time: every Relax VM call traced into a session's sinks (the dump writer, ...).

api.py holds the switches (enable/disable, check-numerics); session.py what to record and
where; vm_wrapper.py routes each VM call to the compiled tracer (fast_tracer.py, with
native_call.py in C++) or the VM-instrument fallback (vm_tracer.py). With tvmdbg_tb.capture,
the only part of tvmdbg that imports TVM eagerly.
"""
