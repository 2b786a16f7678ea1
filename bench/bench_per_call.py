"""Where a traced VM call's time goes: each piece of the compiled tracer's per-call path
replaced in turn by a no-op (or by its first result, reused), alternating with the full path.

    TVM_NUM_THREADS=1 .venv/bin/python bench/bench_per_call.py [--workload big1M|chain10|train_step]
        [--mode FULL_HEALTH] [--path native|python]
        [--pieces call,native,capture,finish,rows,scan,parts,execution,sinks,writer]

--path: the call traced by native_call (C++, the default once built) or by CompiledTracer's
Python path (which serves whatever native_call hands back). Pieces: `call` (the whole
tracer: the instrumented executable called bare), `native` (native_call replaced by the
Python path: negative, what native_call saves), and, on the Python path only (native_call
does them in its own C++ call): `writer` (DebugEventsWriter.write_call, the records framed
and queued), `capture` (the caller's stack), `finish` (everything after the VM returned: the buffers only go back to
their pool), `rows` (the one native pass of a call with one buffer: its trace tails,
health summaries and the replay's scan), the separate passes other calls take (`scan`: the
replay's first non-finite row, `parts`: the trace tails, `execution`: the Execution's bytes),
`sinks` (serialized_execution_done and everything after it); `a+b` ablates
several at once. Each line gives the medians of the full and the
ablated call (this thread's CPU time) and their difference: what the piece costs, or, for
`call`, all of tvmdbg's Python per call. After big1M's 8 MB kernel every step runs from cold
caches; chain10 and train_step show the warm costs. An ablated call writes wrong or no records:
this measures, it does not trace.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def _workload(name: str):
    """(a callable running one traced call or training step, how many pairs to time, its VM)."""
    import models
    import tvm
    from tvm import relax

    if name == "train_step":
        training = models.digits_training(lr=0.05, fuse=True)
        return (lambda: training.trainer.update(training.inputs, training.targets)), 3000, training.trainer.vm
    executable, inputs = models.big_elementwise() if name == "big1M" else models.chain(10, 16)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs]
    # vm["main"] per call, as the training step's Trainer.update does: so that `call` and
    # `native`, which change what vm[name] returns, apply.
    return (lambda: vm["main"](*args)), 1500 if name == "big1M" else 5000, vm


def _replacements(vm) -> dict[str, tuple[object, str, object]]:
    """piece -> (owner, attribute, replacement; None: the original's first result, reused)."""
    from tvmdbg_tb.capture import frames
    from tvmdbg_tb.events.writer import DebugEventsWriter
    from tvmdbg_tb.replay.auto import AutoReplay
    from tvmdbg_tb.tracing import fast_tracer, vm_wrapper
    from tvmdbg_tb.tracing.session import Session

    tracer = fast_tracer.CompiledTracer
    stack = frames.capture_call(0)
    instance = vm_wrapper.tracer_of(vm)  # its Execution builder is picked when it starts
    return {
        "call": (tracer, "traced", lambda self, name, function, fallback: function),
        "native": (tracer, "traced", lambda self, name, function, fallback: fallback),
        "capture": (frames, "capture_call", lambda skip=0: stack),
        "finish": (tracer, "_finish_fast", _releasing_only),
        "rows": (tracer, "_one_pass", None),
        "scan": (AutoReplay, "scan_buffers", lambda *args: None),
        "parts": (tracer, "_payloads", None),
        "execution": (instance, "_execution_bytes", None),
        "sinks": (Session, "serialized_execution_done", lambda *args: None),
        "writer": (DebugEventsWriter, "write_call", lambda *args, **kwargs: None),
    }


def _releasing_only(tracer, call, *args) -> None:
    """_finish_fast ablated: the call's buffers back to the pool, nothing read or written."""
    from tvmdbg_tb.tracing import fast_tracer

    for fid, tensor, array in call.buffers:
        fast_tracer._release(fid, tensor, array)


def _reusing_first(function):
    first = []

    def reused(*args):
        if not first:
            first.append(function(*args))
        return first[0]

    return reused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="big1M", choices=["big1M", "chain10", "train_step"])
    parser.add_argument("--mode", default="FULL_HEALTH")
    parser.add_argument("--path", default="native", choices=["native", "python"])
    parser.add_argument("--pieces", default="call,native")
    options = parser.parse_args()

    import tvmdbg
    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.tracing import native_call, native_rows
    from tvmdbg_tb.tracing.state import ACTIVE, Paths, TracingState

    for library in (native_records.LIBRARY, native_rows.LIBRARY, native_call.LIBRARY):
        library.load()  # as a long-running program has them
    ACTIVE.state = TracingState(paths=Paths(native_calls=options.path == "native"))  # this process's, for good
    tvmdbg.enable_dump_debug_info(tempfile.mkdtemp(), tensor_debug_mode=options.mode)
    try:
        step, pairs, vm = _workload(options.workload)
        for _ in range(200):
            step()
        table = _replacements(vm)
        originals = {piece: getattr(owner, attribute) for piece, (owner, attribute, _) in table.items()}
        for piece, (owner, attribute, replacement) in list(table.items()):
            if replacement is None:
                table[piece] = (owner, attribute, _reusing_first(originals[piece]))

        def ablate(pieces: list[str], on: bool) -> None:
            for piece in pieces:
                owner, attribute, replacement = table[piece]
                setattr(owner, attribute, replacement if on else originals[piece])

        clock = time.thread_time
        for name in options.pieces.split(","):
            pieces = name.split("+")
            unknown = [p for p in pieces if p not in table]
            if unknown:
                parser.error(f"unknown piece(s) {unknown}; choose from {sorted(table)}")
            full, ablated = [], []
            for _ in range(pairs):
                ablate(pieces, True)
                start = clock()
                step()
                ablated.append(clock() - start)
                ablate(pieces, False)
                start = clock()
                step()
                full.append(clock() - start)
            a, b = statistics.median(full) * 1e6, statistics.median(ablated) * 1e6
            print(
                f"{options.workload} {options.mode} without {name:24s} full {a:7.1f} us, ablated {b:7.1f} us: "
                f"{a - b:6.1f} us",
                flush=True,
            )
    finally:
        tvmdbg.disable_dump_debug_info()


if __name__ == "__main__":
    main()
