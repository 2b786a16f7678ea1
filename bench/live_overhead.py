"""Per-kernel cost of live control: a chain of 200 tiny kernels, FULL_HEALTH, three ways.

    TVM_NUM_THREADS=1 python bench/live_overhead.py plain|live|live_wp

plain: the normal dump (fast path); live: live=True, no watchpoints (the VM instrument);
live_wp: live=True with a NaN/Inf and an |value| watchpoint on all ops. Prints µs per call.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import models  # noqa: E402
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else "live"
tvmdbg.enable_dump_debug_info(tempfile.mkdtemp(), "FULL_HEALTH", circular_buffer_size=1000, live=mode != "plain")
if mode == "live_wp":
    tvmdbg.add_watchpoint("nan_or_inf")
    tvmdbg.add_watchpoint("abs_above", threshold=1e6)
executable, inputs = models.chain(200)
vm = relax.VirtualMachine(executable, tvm.cpu())
args = [tvm.runtime.tensor(a) for a in inputs]
for _ in range(20):
    vm["main"](*args)
samples = []
for _ in range(7):
    start = time.perf_counter()
    for _ in range(50):
        vm["main"](*args)
    samples.append((time.perf_counter() - start) / 50 * 1e6)
tvmdbg.disable_dump_debug_info()
print(f"{mode}: {statistics.median(samples):.0f} us per call of 200 kernels")
