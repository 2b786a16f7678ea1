"""A training loop as a user runs it: each configuration in a process of its own, wall clock.

    TVM_NUM_THREADS=1 .venv/bin/python bench/bench_standalone.py [--modes NO_TENSOR,FULL_HEALTH]
        [--seconds 5] [--pairs 3] [--root CHECKOUT]

bench_overhead.py's paired rows alternate a plain and a traced call in one process, so the
plain calls run with the caches the traced ones left, and the collector and the flushing
thread serve both. Here the digits MLP's `Trainer.update` loop runs for `--seconds` in its own
process, plain or traced with the default options (the 1000-record ring included), the two
alternating, `--pairs` times per mode. Prints each pair's microseconds per step and their
ratio, then the median ratio per mode. `--root`: the tvmdbg checkout to import (another
tree's, to compare releases; its tests/models.py builds the model).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _child(root: str, mode: str, traced: bool, seconds: float) -> None:
    """One configuration's loop: prints microseconds per step."""
    import importlib

    sys.path.insert(0, os.path.join(root, "tests"))
    sys.path.insert(0, root)
    import models

    import tvmdbg
    from tvmdbg_tb.tracing import vm_wrapper

    for name in ("tvmdbg_tb.events.native_records", "tvmdbg_tb.tracing.native_rows", "native_call"):
        try:  # as a long-running program has them (an older tree may lack one)
            importlib.import_module(name if "." in name else "tvmdbg_tb.tracing." + name).LIBRARY.load()
        except ImportError:
            pass
    with tempfile.TemporaryDirectory() as logdir:
        if traced:
            tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode)
        training = models.digits_training(lr=0.05, fuse=True)
        if not traced:
            vm_wrapper.exclude(training.trainer.vm)
        for _ in range(200):
            training.trainer.update(training.inputs, training.targets)
        steps, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            training.trainer.update(training.inputs, training.targets)
            steps += 1
        if traced:
            tvmdbg.disable_dump_debug_info()
    print(f"{seconds / steps * 1e6:.2f}")


def _run(root: str, mode: str, traced: bool, seconds: float) -> float:
    command = [sys.executable, __file__, "--root", root, "--child", mode]
    command += ["--traced" if traced else "--plain", str(seconds)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="NO_TENSOR,FULL_HEALTH")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("child_seconds", nargs="?", type=float, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        _child(os.path.abspath(options.root), options.child, options.traced, options.child_seconds)
        return
    for mode in options.modes.split(","):
        ratios = []
        for _ in range(options.pairs):
            plain = _run(options.root, mode, False, options.seconds)
            traced = _run(options.root, mode, True, options.seconds)
            ratios.append(traced / plain)
            print(f"train_step {mode}: plain {plain:.1f} us/step, traced {traced:.1f} us/step, ratio {ratios[-1]:.3f}")
        print(f"train_step {mode}: median ratio {statistics.median(ratios):.3f} over {options.pairs} pairs", flush=True)


if __name__ == "__main__":
    main()
