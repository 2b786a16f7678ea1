"""A compiled function's stats rows turned into record bytes in C++ (native_rows.cc).

Why: after each VM call fast_tracer turns the stats buffer's rows into bytes: a trace tail
per executed kernel (debug values, duration), the health-mode Execution's summaries
(execution_template), and, while replay hunts, the first non-finite row. In Python that is a
loop step per row; numpy is cheap per row but pays a fixed cost per operation (more after
a kernel that evicted the caches), so it only gained from a couple dozen rows up. This CPython extension
does each pass for any number of rows in well under a microsecond, which is what a
training step's handful of kernels and dozens of summaries per call need. The bytes are the
loops' (doubles in host order: the compiled fast path runs on x86-64 only, see
fast_tracer.supported_platform).

Built by tvmdbg_tb.native in a background thread when a compiled tracer starts; until then,
and without a compiler or with TVMDBG_NATIVE_ROWS=0, the callers use numpy or their loops.
"""

from __future__ import annotations

from tvmdbg_tb.native import PythonExtension, source

ENV_SWITCH = "TVMDBG_NATIVE_ROWS"  # "0": numpy or the Python loops

LIBRARY = PythonExtension(source("native_rows.cc"), ENV_SWITCH, "native stats-row conversion")
