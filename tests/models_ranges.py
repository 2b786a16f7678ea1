"""Float16 models for range alerts: activations that grow layer by layer until one overflows,
values that grow call by call, and their healthy twins.

    growth_chain(gain):  h = x;  for each layer: h = matmul(h, gain * Q_i) + 0   (Q_i orthogonal)

With gain 4 each layer multiplies the abs-max by about 4 (exactly, up to the float16 roundings
and how Q_i mixes the vector); with gain 1 it stays about where it started. The expected
abs-max of every layer comes from numpy (float32 arithmetic on the float16 weights, rounded
to float16 per layer), independently of TVM and tvmdbg.
"""

from __future__ import annotations

import numpy as np
import tvm
from models import compile_module, line_of
from tvm import relax

DIM = 16
X = np.random.default_rng(1).uniform(-1, 1, (1, DIM)).astype("float16")


def _weights(layers: int, gain: float) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [(np.linalg.qr(rng.standard_normal((DIM, DIM)))[0] * gain).astype("float16") for _ in range(layers)]


def growth_chain(gain: float, layers: int = 9, fuse: bool = True):
    """(executable, inputs, expected float16 abs-max per layer, line of each layer's matmul)."""
    weights = _weights(layers, gain)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, DIM), "float16"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for w in weights:
                h = bb.emit(relax.op.matmul(h, relax.const(w)))  # layer matmul
                h = bb.emit(relax.op.add(h, relax.const(np.float16(0.0))))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    expected, h = [], X.astype("float32")
    with np.errstate(over="ignore"):
        for w in weights:
            h = (h @ w.astype("float32")).astype("float16").astype("float32")
            expected.append(float(np.abs(h).max()))
    return compile_module(bb.get(), fuse), [X], expected, line_of(__file__, "# layer matmul")


def doubled(dtype: str):
    """A one-op model y = x * 2 (an executable), for values that grow call by call."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, DIM), dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.multiply(x, relax.const(2.0, dtype)))  # doubled
        bb.emit_func_output(y)
    return compile_module(bb.get(), fuse=False)


def run_calls(executable, inputs_per_call: list[list[np.ndarray]]) -> None:
    vm = relax.VirtualMachine(executable, tvm.cpu())
    for inputs in inputs_per_call:
        vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
