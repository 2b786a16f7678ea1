"""The compile-time instrumentation's three steps alone, on one captured build of a chain.

    .venv/bin/python bench/bench_compile_steps.py [--kernels 1000] [--repeats 15]

A chain of element-wise kernels is compiled once under FULL_HEALTH while the inputs of each
step are kept: `describe` (capture.describe: the origins walk of the input module and the
call-site walk), `instrument` (compiled.instrument on a copy of the lowered module) and
`register` (a new session registering the description: op records built and queued to a
writer). Each is then run `repeats` times, the collector on, and its median and minimum
printed in ms. In a real build the collector is paused around them (capture._CollectorPaused).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()

    import gc

    import models
    import tvm

    import tvmdbg
    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.capture import hooks as capture
    from tvmdbg_tb.events.options import DumpOptions
    from tvmdbg_tb.events.writer import DebugEventsWriter
    from tvmdbg_tb.proto import debug_event_pb2 as pb
    from tvmdbg_tb.tracing.session import Session, WriterSink

    kept = {}
    instrument, describe = compiled.instrument, capture.describe

    def keep_lowered(mod, info, health):
        kept["instrument"] = (tvm.IRModule(dict(mod.functions_items())), info, health)
        return instrument(mod, info, health)

    def keep_describe(*args):
        kept["describe"] = args
        return describe(*args)

    compiled.instrument, capture.describe = keep_lowered, keep_describe
    with tempfile.TemporaryDirectory() as logdir:
        # Kept enabled while timing: describe finds the user's stacks recorded at emit.
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            models.chain(options.kernels)
            compiled.instrument, capture.describe = instrument, describe
            writer = DebugEventsWriter(
                os.path.join(logdir, "steps"), DumpOptions(tensor_debug_mode=pb.FULL_HEALTH, circular_buffer_size=-1)
            )

            def register():
                session = Session(writer.options, writer=writer)
                session.add_sink(WriterSink(writer))
                session.register_executable(kept["instrument"][1])

            def instrument_copy():
                mod, info, health = kept["instrument"]
                compiled.instrument(tvm.IRModule(dict(mod.functions_items())), info, health)

            steps = {"describe": lambda: describe(*kept["describe"]), "instrument": instrument_copy}
            steps["register"] = register
            print(f"{options.kernels}-kernel chain, FULL_HEALTH, median / min of {options.repeats} runs (ms)")
            for name, step in steps.items():
                times = []
                for _ in range(options.repeats):
                    gc.collect()
                    start = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - start)
                print(f"{name:<11} {statistics.median(times) * 1e3:8.2f} {min(times) * 1e3:8.2f}", flush=True)
            writer.close()
        finally:
            compiled.instrument, capture.describe = instrument, describe
            tvmdbg.disable_dump_debug_info()


if __name__ == "__main__":
    main()
