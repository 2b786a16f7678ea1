"""Trace tails of a compiled function's stats rows in C++ (native_tails.cc).

Why: fast_tracer turns each executed kernel row into a trace tail (debug values, duration).
The row loop costs ~1.5 us per row in Python; numpy's pass is cheap per row but pays ~1 us
per operation, so it only gained from ~24 rows up. This CPython extension does the pass for
any number of rows in ~0.3 us plus ~10 ns a row, which is what a training step's handful of
kernels per call needs. The bytes are the loop's (doubles in host order: the compiled fast
path runs on x86-64 only, see fast_tracer.supported_platform).

Built by tvmdbg_tb.native in a background thread when a compiled tracer starts; until then,
and without a compiler or with TVMDBG_NATIVE_TAILS=0, fast_tracer uses numpy or the loop.
"""

from __future__ import annotations

from pathlib import Path

from tvmdbg_tb.native import PythonExtension

ENV_SWITCH = "TVMDBG_NATIVE_TAILS"  # "0": numpy or the row loop

LIBRARY = PythonExtension(Path(__file__).with_name("native_tails.cc"), ENV_SWITCH, "native trace tails")
