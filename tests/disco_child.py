"""A disco program for tests/test_disco.py: the controller compiles a small model with tvmdbg
enabled, exports it, and runs it on a 2-worker tvmdbg.disco.ProcessSession where only rank
1's input makes log() produce NaN. Prints the line of the log op. With --plain, runs the module
on TVM's own ProcessSession given tvmdbg's worker entrypoint instead.

    python disco_child.py LOGDIR LIBRARY [--plain]
"""

from __future__ import annotations

import inspect
import sys

import numpy as np


def main() -> None:
    logdir, library = sys.argv[1], sys.argv[2]
    import tvmdbg

    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            logged = bb.emit(relax.op.log(x))
            line = inspect.currentframe().f_lineno - 1
            doubled = bb.emit_output(relax.op.multiply(logged, relax.const(2.0, "float32")))
        bb.emit_func_output(doubled)
    tvm.compile(bb.get(), "llvm").export_library(library)
    if "--plain" in sys.argv:
        run_on_tvms_own_session(tvmdbg.disco.disco_module(), library)
        return

    session = tvmdbg.disco.ProcessSession(2)
    module = session.load_vm_module(library)
    main_function = module["main"]
    inputs = session.empty((8,), "float32")
    inputs.debug_copy_from(0, np.arange(1, 9, dtype="float32"))  # rank 0: all positive
    inputs.debug_copy_from(1, np.arange(-3, 5, dtype="float32"))  # rank 1: log of negatives
    for _ in range(2):
        result = main_function(inputs)
    out = [result.debug_get_from_remote(rank).numpy() for rank in range(2)]
    assert np.isfinite(out[0]).all() and np.isnan(out[1]).any(), out
    del result, inputs, main_function, module  # freed on the workers while they run
    session.shutdown()
    print("LINE", line, flush=True)


def run_on_tvms_own_session(disco, library: str) -> None:
    """TVM's own session given tvmdbg's worker entrypoint: rank 1 runs the module compiled
    with tvmdbg enabled (without the hook: "Cannot find ffi::Function tvmdbg.stats")."""
    plain = disco.ProcessSession(2, entrypoint="tvmdbg_tb.disco.worker")
    inputs = plain.empty((8,), "float32")
    inputs.debug_copy_from(1, np.arange(1, 9, dtype="float32"))
    inputs.debug_copy_from(0, np.arange(1, 9, dtype="float32"))
    result = plain.load_vm_module(library)["main"](inputs)
    expected = 2 * np.log(np.arange(1, 9, dtype="float32"))
    assert np.allclose(result.debug_get_from_remote(1).numpy(), expected)
    del result, inputs
    plain.shutdown()
    print("PLAIN ok", flush=True)


if __name__ == "__main__":
    main()
