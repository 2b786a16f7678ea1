"""Models whose NaN is made and masked inside one fused kernel (output finite), and one whose
NaN leaves a fused kernel from its second op: TVMScript (spans) and BlockBuilder (emit frames)."""

import numpy as np
from tvm import relax
from tvm.relax.frontend import nn
from tvm.script import ir as I
from tvm.script import relax as R

MASKED_SQRT_LINE = 21  # the line of `r = R.sqrt(h1)` below
MASKED_LOG_LINE = 35  # the line of `lg = R.log(scaled)` below
LEAKED_LOG_LINE = 47  # the line of `lg = R.log(h)` below


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


# -- made and masked inside one fused kernel: the inner-op check's cases -----------------------


@I.ir_module
class MaskedDivide:
    """x / y makes NaN (0/0), -inf and +inf; clip hides them all."""

    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            q = R.divide(x, y)  # masked: divide
            out = R.multiply(R.clip(q, -1.0, 1.0), R.const(2.0, "float32"))
            R.output(out)
        return out


def masked_divide_inputs(nan: int = 3, neg_inf: int = 2, pos_inf: int = 5) -> list[np.ndarray]:
    """Inputs whose quotient holds exactly that many NaN, -inf and +inf."""
    rng = np.random.default_rng(2)
    x = rng.uniform(0.5, 2.0, (4, 8)).astype("float32")
    y = rng.uniform(0.5, 2.0, (4, 8)).astype("float32")
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)
    flat_y[: nan + neg_inf + pos_inf] = 0.0
    flat_x[:nan] = 0.0
    flat_x[nan : nan + neg_inf] *= -1.0
    return [x, y]


@I.ir_module
class HalfOverflow:
    """A float16 multiply overflows to +-inf, inf - inf makes NaN; where keeps small inputs only
    (not `big - big`: TVM simplifies x - x to 0)."""

    @R.function
    def main(x: R.Tensor((4, 8), "float16")) -> R.Tensor((4, 8), "float16"):
        with R.dataflow():
            big = R.multiply(x, R.const(1000.0, "float16"))  # masked: multiply
            near = R.multiply(x, R.const(999.0, "float16"))
            diff = R.subtract(big, near)
            small = R.less(R.abs(x), R.const(10.0, "float16"))
            out = R.where(small, diff, R.const(0.0, "float16"))
            R.output(out)
        return out


def half_overflow_inputs() -> list[np.ndarray]:
    x = np.random.default_rng(3).uniform(-2.0, 2.0, (4, 8)).astype("float16")
    x[0, :3] = [100.0, -200.0, 300.0]  # x * 1000 overflows float16 (max 65504)
    return [x]


class _MaskedSqrtNet(nn.Module):
    """nn.Module: relu(sqrt(x @ w)) * 2, the sqrt of negative sums masked by the relu."""

    def __init__(self):
        super().__init__()
        self.line = -1

    def forward(self, x: nn.Tensor, w: nn.Tensor):
        h = nn.op.matmul(x, w)
        r, self.line = nn.op.sqrt(h), _line()
        return nn.op.relu(r) * 2.0


def masked_sqrt_nn() -> tuple[object, int]:
    """_MaskedSqrtNet exported to Relax; returns (module, line of the sqrt)."""
    net = _MaskedSqrtNet()
    tensor = nn.spec.Tensor
    mod, _ = net.export_tvm(spec={"forward": {"x": tensor([4, 8], "float32"), "w": tensor([8, 8], "float32")}})
    return mod, net.line


@I.ir_module
class MaskedFill:
    """A mask's -inf written and absorbed inside one kernel (where, then exp): intended masking."""

    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            keep = R.greater(x, R.const(0.0, "float32"))
            filled = R.where(keep, x, R.const(float("-inf"), "float32"))
            out = R.exp(filled)
            R.output(out)
        return out


@I.ir_module
class MaskedFillAndSqrt:
    """A mask's -inf absorbed (where, then exp) and a NaN computed and masked (maximum of a
    sqrt) inside one kernel: the mask is intended, the NaN is not."""

    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            keep = R.greater(x, R.const(0.0, "float32"))
            filled = R.where(keep, x, R.const(float("-inf"), "float32"))
            masked = R.exp(filled)
            root = R.sqrt(x)  # computed: sqrt
            clipped = R.maximum(root, R.const(0.0, "float32"))
            out = R.add(masked, clipped)
            R.output(out)
        return out


@I.ir_module
class MaskTimesInf:
    """A user's mask bug inside one kernel: (1 - keep) * -inf is NaN where kept, and the
    kernel's output shows it (a kernel writing a -inf literal: the hunt looks for a NaN)."""

    @R.function
    def main(keep: R.Tensor((4, 8), "float32"), x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            dropped = R.subtract(R.const(1.0, "float32"), keep)
            mask = R.multiply(dropped, R.const(float("-inf"), "float32"))  # the bug: 0 * -inf
            out = R.add(x, mask)
            R.output(out)
        return out


def mask_times_inf_inputs() -> list[np.ndarray]:
    """MaskTimesInf's keep (ones but the last column) and x."""
    keep = np.ones((4, 8), "float32")
    keep[:, -1] = 0.0
    return [keep, np.linspace(-1.0, 1.0, 32, dtype="float32").reshape(4, 8)]


def positive_inputs() -> list[np.ndarray]:
    """MaskedLog's and MaskedFill's input with every element positive: nothing non-finite."""
    return [np.abs(inputs("MaskedLog")[0]) + 0.5]
