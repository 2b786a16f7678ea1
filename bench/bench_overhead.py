"""Overhead of tvmdbg per tensor debug mode, against the same models uninstrumented.

    .venv/bin/python bench/bench_overhead.py [--quick]

Workloads: a chain of 200 tiny element-wise kernels (added cost per kernel), one kernel
with a 1M-element output (compared with one numpy read of that tensor), and whole models
compiled with fusion: the demo training step (digits MLP, tvm.relax.training), a small CNN
and a small transformer block. Each model is compiled once per mode (under that mode, so
compile-time instrumentation applies), warmed up, then timed call by call; the table gives
medians, the ratio to the uninstrumented median, and the added microseconds per kernel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import models  # noqa: E402
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402

MODES = ["NO_TENSOR", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "SHAPE"]


def _vm_workload(build):
    """A callable running one VM call of a freshly compiled model, and its kernel count."""
    executable, inputs = build()
    vm = relax.VirtualMachine(executable, tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs]
    function = vm["main"]
    return (lambda: function(*args)), None


def _training_workload():
    training = models.digits_training(lr=0.05, fuse=True)
    trainer = training.trainer
    return (lambda: trainer.update(training.inputs, training.targets)), None


WORKLOADS = {
    "chain200": lambda: _vm_workload(lambda: models.chain(200, 16, fuse=False)),
    "big1M": lambda: _vm_workload(models.big_elementwise),
    "train_step": _training_workload,
    "cnn": lambda: _vm_workload(models.small_cnn),
    "transformer": lambda: _vm_workload(models.transformer_block),
}


def _median_us(run, calls: int, seconds: float) -> float:
    for _ in range(3):
        run()
    samples = []
    deadline = time.perf_counter() + seconds
    while len(samples) < calls or (time.perf_counter() < deadline and len(samples) < 20 * calls):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def _kernels(logdir: str) -> float:
    """Kernel executions per call, from the dump itself."""
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        n = run.num_executions()
        return run.num_traces() / n if n else float("nan")


def measure(name: str, calls: int, seconds: float) -> list[tuple]:
    rows = []
    run, _ = WORKLOADS[name]()
    base = _median_us(run, calls, seconds)
    rows.append((name, "uninstrumented", base, 1.0, float("nan")))
    for mode in MODES:
        with tempfile.TemporaryDirectory() as logdir:
            tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
            try:
                run, _ = WORKLOADS[name]()
                median = _median_us(run, calls, seconds)
            finally:
                tvmdbg.disable_dump_debug_info()
            kernels = _kernels(logdir)
        per_kernel = (median - base) / kernels if kernels else float("nan")
        rows.append((name, mode, median, median / base, per_kernel))
    return rows


def numpy_read_us(size: int = 1 << 20) -> float:
    data = np.linspace(-1, 1, size, dtype="float32")
    return _median_us(lambda: data.sum(), 50, 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    options = parser.parse_args()
    calls, seconds = (20, 0.2) if options.quick else (100, 1.0)
    print(f"tvmdbg overhead (median of >= {calls} calls each; one process, one run)")
    print(f"{'workload':<12} {'mode':<15} {'median_us':>11} {'ratio':>7} {'added_us/kernel':>16}")
    for name in options.workloads.split(","):
        for workload, mode, median, ratio, per_kernel in measure(name, calls, seconds):
            print(f"{workload:<12} {mode:<15} {median:>11.1f} {ratio:>7.3f} {per_kernel:>16.2f}", flush=True)
    print(f"numpy read of 1M float32 (sum): {numpy_read_us():.1f} us")


if __name__ == "__main__":
    main()
