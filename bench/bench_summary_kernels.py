"""The separate summary kernel (compiled.kernel: outputs not counted in their producer, and
parameters) built for generic x86-64, as tvmdbg builds it, and for this CPU (LLVM's host
CPU: AVX2/AVX-512 here), on float32 tensors from a training step's sizes to 1M elements.

    TVM_NUM_THREADS=1 .venv/bin/python bench/bench_summary_kernels.py

Each line: the medians of alternating calls (this thread's CPU time) of both builds on the
same tensor, called from Python (~0.15 us of each call is the call itself), and whether they
wrote the same counts. Alone the host build counts up to 2x faster; inside the traced
workloads it made the calls around it slower (README, Performance), so tvmdbg keeps the
generic build.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SHAPES = [(16,), (64, 32), (64, 64), (256, 256), (1 << 20,)]


def main() -> None:
    import tvm

    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.capture.kernel_source import summary_source

    host_target = tvm.target.Target({"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu())})
    print(f"host target: {host_target}")
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        name = f"summary_r{len(shape)}"
        prim = tvm.script.from_source(summary_source(name, "float32", True, False))
        prim = prim.with_attr("global_symbol", name)
        builds = [tvm.compile(tvm.IRModule({name: prim}), t)[name] for t in ("llvm", host_target)]
        data = rng.standard_normal(shape).astype("float32")
        data.flat[::997] = 0.0
        tensor = tvm.runtime.tensor(data)
        rows = [tvm.runtime.tensor(np.zeros((2, compiled.ROW_WIDTH))) for _ in builds]
        times: list[list[float]] = [[], []]
        calls = 2000 if data.size < 100_000 else 200
        for _ in range(calls):
            for k, build in enumerate(builds):
                np.from_dlpack(rows[k])[1, 0] = 0.0  # a row not written yet
                start = time.thread_time()
                build(tensor, rows[k], 1)
                times[k].append(time.thread_time() - start)
        generic, host = (statistics.median(t) * 1e6 for t in times)
        counts = [np.from_dlpack(r)[1, 1:8].tolist() for r in rows]
        print(
            f"{str(shape):>12} generic {generic:8.2f} us, host {host:8.2f} us, ratio {host / generic:.2f}, "
            f"same counts: {counts[0] == counts[1]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
