"""A child program for live tests: the planted-NaN model run N times with live control.

    python tests/live_child.py LOGDIR TIMEOUT CALLS

Adds a NaN/Inf watchpoint (so the first call pauses at the log kernel), prints READY when
live, DONE at the end. Started with subprocess.Popen by tests/test_live.py.
"""

import sys

import models

import tvmdbg

logdir, timeout, calls = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
model = models.blockbuilder_planted("log")
writer = tvmdbg.enable_dump_debug_info(logdir, "FULL_HEALTH", circular_buffer_size=-1, live=True, live_timeout=timeout)
tvmdbg.add_watchpoint("nan_or_inf", op_regex="log")
print("READY", writer.run_dir, flush=True)
for _ in range(calls):
    model.run()
tvmdbg.disable_dump_debug_info()
print("DONE", flush=True)
