"""A model whose float16 build overflows inside one fused kernel, for comparing down to the
Relax op:

    h = relu(matmul(x, w));  sq = h * h;  y = sq / 1000

In float32 every value is finite (h reaches ~310, sq ~9.7e4, y ~97). After
`relax.transform.ToMixedPrecision` the ops after the matmul run in float16: `h * h` passes
65504 and becomes +inf, and the divide passes the inf on. With the default pipeline the four
ops fuse into one kernel (`fused_matmul_relu_multiply_divide`, with casts in the mixed build),
so the kernel's output shows only that something inside it overflowed.
"""

from __future__ import annotations

import numpy as np
from models import compile_module, line_of
from tvm import relax

X = np.random.default_rng(0).uniform(0, 1, (4, 32)).astype("float32")
W = (np.random.default_rng(1).uniform(0, 1, (32, 16)) * 25).astype("float32")


def squared_relu(mixed: bool, fuse: bool):
    """(executable, inputs): the model in float32, or cast by ToMixedPrecision (mixed)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(X.shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            m = bb.emit(relax.op.matmul(x, relax.const(W)))
            h = bb.emit(relax.op.nn.relu(m))
            sq = bb.emit(relax.op.multiply(h, h))  # planted: h * h
            y = bb.emit_output(relax.op.divide(sq, relax.const(1000.0, "float32")))
        bb.emit_func_output(y)
    mod = bb.get()
    if mixed:
        mod = relax.transform.ToMixedPrecision()(mod)
    return compile_module(mod, fuse), [X]


PLANTED_LINE = line_of(__file__, "# planted: h * h")
DIVIDE_LINE = PLANTED_LINE + 1


def expected() -> dict:
    """What numpy says, independently of TVM: h*h's abs-max in float32 and whether it passes
    float16's largest value."""
    h = np.maximum(X @ W, 0)
    return {"h_max": float(h.max()), "sq_max": float((h * h).max()), "overflows_float16": bool((h * h).max() > 65504)}
