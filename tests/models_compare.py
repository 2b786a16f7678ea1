"""Models for the comparison tests: one model built in float32 or float16, fused or not.

    h = x * 2;  s = sum(h, axis=1)  (16384 elements: float16 accumulation loses most of it);
    out = h / s;  y = out + 1

In float16 the elementwise ops stay within a 1e-2 relative tolerance of float32, and the
large reduction is the first op to leave it; its error then reaches everything after it.
Also the `tvmdbg compare` command as a user runs it (compare_cli).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import tvm
from models import compile_module, line_of
from tvm import relax

N = 16384
X = np.random.default_rng(0).uniform(0.5, 1.0, size=(2, N)).astype("float32")


def reduction_model(dtype: str = "float32", fuse: bool = False):
    """(executable, inputs, line of the planted reduction)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, N), dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.multiply(x, relax.const(2.0, dtype)))
            s = bb.emit(relax.op.sum(h, axis=[1], keepdims=True))  # planted: large reduction
            out = bb.emit(relax.op.divide(h, s))
            y = bb.emit_output(relax.op.add(out, relax.const(1.0, dtype)))
        bb.emit_func_output(y)
    executable = compile_module(bb.get(), fuse)
    return executable, [X.astype(dtype)], line_of(__file__, "# planted: large reduction")


def run(executable, inputs) -> None:
    vm = relax.VirtualMachine(executable, tvm.cpu())
    vm["main"](*[tvm.runtime.tensor(a) for a in inputs])


def scaled_calls(scales: list[float]):
    """A build running main of the float32 unfused model once per scale, its input scaled."""

    def build():
        executable, inputs, _ = reduction_model("float32", False)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        for scale in scales:
            vm["main"](tvm.runtime.tensor(inputs[0] * np.float32(scale)))

    return build


def compare_cli(*args: str) -> subprocess.CompletedProcess:
    """`tvmdbg compare *args` in a fresh process (text output, exit status)."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())", "compare", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
