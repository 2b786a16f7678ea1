"""Models whose NaN is made and masked inside one fused kernel (output finite), and one whose
NaN leaves a fused kernel from its second op: TVMScript (spans) and BlockBuilder (emit frames)."""

import numpy as np
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

MASKED_SQRT_LINE = 20  # the line of `r = R.sqrt(h1)` below
MASKED_LOG_LINE = 34  # the line of `lg = R.log(scaled)` below
LEAKED_LOG_LINE = 46  # the line of `lg = R.log(h)` below


@I.ir_module
class MaskedSqrt:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            h1 = R.add(R.matmul(x, w), R.const(0.0, "float32"))
            r = R.sqrt(h1)
            m = R.maximum(r, R.const(0.0, "float32"))
            out = R.multiply(m, R.const(2.0, "float32"))
            R.output(out)
        return out


@I.ir_module
class MaskedLog:
    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            scaled = R.multiply(x, R.const(3.0, "float32"))
            positive = R.greater(scaled, R.const(0.0, "float32"))
            lg = R.log(scaled)
            out = R.where(positive, lg, R.const(0.0, "float32"))
            R.output(out)
        return out


@I.ir_module
class LeakedLog:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            h = R.subtract(x, y)
            lg = R.log(h)
            out = R.sum(R.multiply(lg, R.const(2.0, "float32")), axis=[1])
            R.output(out)
        return out


def masked_log_bb() -> tuple[object, int]:
    """MaskedLog written with BlockBuilder; returns (module, line of the log)."""
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            scaled = bb.emit(relax.op.multiply(x, relax.const(3.0, "float32")))
            positive = bb.emit(relax.op.greater(scaled, relax.const(0.0, "float32")))
            lg = bb.emit(relax.op.log(scaled))
            line = _line() - 1
            out = bb.emit_output(relax.op.where(positive, lg, relax.const(0.0, "float32")))
        bb.emit_func_output(out)
    return bb.get(), line


def masked_sqrt_bb() -> tuple[object, int]:
    """MaskedSqrt written with BlockBuilder; returns (module, line of the sqrt)."""
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    w = relax.Var("w", relax.TensorType((8, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h1 = bb.emit(relax.op.add(relax.op.matmul(x, w), relax.const(0.0, "float32")))
            r = bb.emit(relax.op.sqrt(h1))
            line = _line() - 1
            m = bb.emit(relax.op.maximum(r, relax.const(0.0, "float32")))
            out = bb.emit_output(relax.op.multiply(m, relax.const(2.0, "float32")))
        bb.emit_func_output(out)
    return bb.get(), line


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype("float32")
    if name == "MaskedSqrt":
        return [x, rng.standard_normal((8, 8)).astype("float32")]
    if name == "LeakedLog":
        return [x, x + 1.0]
    return [x]


@I.ir_module
class LeakedExp:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            h = R.add(R.matmul(x, w), R.const(100.0, "float32"))
            s = R.multiply(h, R.sigmoid(h))
            e = R.exp(s)  # leak: exp
            out = R.multiply(e, R.const(0.5, "float32"))
            R.output(out)
        return out


@I.ir_module
class LeakedSoftmaxLog:
    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            p = R.nn.softmax(R.multiply(x, R.const(1000.0, "float32")), axis=-1)
            lg = R.log(p)  # leak: log
            out = R.multiply(lg, R.const(-1.0, "float32"))
            R.output(out)
        return out


@I.ir_module
class LeakedDivSqrt:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            d = R.divide(x, y)
            r = R.sqrt(d)  # leak: sqrt
            out = R.add(r, R.const(1.0, "float32"))
            R.output(out)
        return out


LEAKED = {"LeakedExp": "relax.exp", "LeakedSoftmaxLog": "relax.log", "LeakedDivSqrt": "relax.sqrt"}


def leaked_inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype("float32")
    if name == "LeakedExp":
        return [np.abs(x), np.abs(rng.standard_normal((8, 8)).astype("float32"))]
    if name == "LeakedDivSqrt":
        return [x, np.abs(x) + 1.0]
    return [x]
