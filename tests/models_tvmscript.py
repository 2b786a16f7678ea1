"""TVMScript versions of the planted-NaN model (spans give file:line; see models.py)."""

from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class PlantedLog:
    @R.function
    def main(
        x: R.Tensor((1, 8), "float32"), y: R.Tensor((1, 8), "float32"), w: R.Tensor((8, 8), "float32")
    ) -> R.Tensor((1, 8), "float32"):
        with R.dataflow():
            h = R.subtract(x, y)
            bad = R.log(h)  # planted: log
            scaled = R.multiply(bad, R.const(2.0, "float32"))
            hidden = R.maximum(R.matmul(scaled, w), R.const(0.0, "float32"))
            out = R.add(hidden, x)
            R.output(out)
        return out


@I.ir_module
class PlantedSqrt:
    @R.function
    def main(
        x: R.Tensor((1, 8), "float32"), y: R.Tensor((1, 8), "float32"), w: R.Tensor((8, 8), "float32")
    ) -> R.Tensor((1, 8), "float32"):
        with R.dataflow():
            h = R.subtract(x, y)
            bad = R.sqrt(h)  # planted: sqrt
            scaled = R.multiply(bad, R.const(2.0, "float32"))
            hidden = R.maximum(R.matmul(scaled, w), R.const(0.0, "float32"))
            out = R.add(hidden, x)
            R.output(out)
        return out


@I.ir_module
class PlantedDiv:
    @R.function
    def main(
        x: R.Tensor((1, 8), "float32"), y: R.Tensor((1, 8), "float32"), w: R.Tensor((8, 8), "float32")
    ) -> R.Tensor((1, 8), "float32"):
        with R.dataflow():
            h = R.subtract(x, y)
            bad = R.divide(x, h)  # planted: div
            scaled = R.multiply(bad, R.const(2.0, "float32"))
            hidden = R.maximum(R.matmul(scaled, w), R.const(0.0, "float32"))
            out = R.add(hidden, x)
            R.output(out)
        return out


MODULES = {
    "log": (PlantedLog, "# planted: log"),
    "sqrt": (PlantedSqrt, "# planted: sqrt"),
    "div": (PlantedDiv, "# planted: div"),
}


@I.ir_module
class TwoFunctions:
    """main calls helper: kernels of both are traced, each under its own graph."""

    @R.function
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.exp(x)
        z = R.add(y, x)
        return z

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = TwoFunctions
        a = R.add(x, x)
        b = cls.helper(a)
        c = R.multiply(b, a)
        return c


@I.ir_module
class WithBranch:
    """Control flow: traced by the VM instrument even where summary kernels are compiled in."""

    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        if flag:  # noqa: SIM108 (TVMScript control flow, not Python)
            y = R.exp(x)
        else:
            y = R.log(x)
        z = R.add(y, x)
        return z
