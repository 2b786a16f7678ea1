"""Tiny real Relax models shared by tests: each compiles in well under a second.

`planted(frontend, fault, fuse)` builds a model in which one op (log of zero/negatives,
sqrt of negatives, or division by zero) produces NaN/Inf, and a later maximum(x, 0) (a
ReLU after a matmul, so in another kernel even with fusion) hides it; it returns the
executable, inputs and where the faulty op is.

    h = x - y;  bad = fault(h);  hidden = maximum(matmul(bad * 2, w), 0);  out = hidden + x
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.target import Target

FAULTS = ("log", "sqrt", "div")
FAULT_OP_TYPES = {"log": "relax.log", "sqrt": "relax.sqrt", "div": "relax.divide"}

# x - y holds a zero (log -> -inf, x / 0 -> inf) and negatives (log, sqrt -> nan).
X = np.array([[1, 2, 3, 4, 5, 6, 7, 8]], dtype="float32")
Y = np.array([[1, 1, 5, 1, 9, 1, 1, 1]], dtype="float32")
W = np.eye(8, dtype="float32")
INPUTS = [X, Y, W]
SHAPE = (1, 8)


@dataclass
class Planted:
    """A compiled model with a planted non-finite op."""

    executable: object
    function: str
    inputs: list[np.ndarray]
    fault_op_type: str
    fault_line: int  # line in `fault_file` that creates the faulty op
    fault_file: str = __file__
    extra: dict = field(default_factory=dict)

    def run(self, device=None):
        vm = relax.VirtualMachine(self.executable, device or tvm.cpu())
        args = [tvm.runtime.tensor(a) for a in self.inputs]
        return vm, vm[self.function](*args)


def _line() -> int:
    return sys._getframe(1).f_lineno


def compile_module(mod, fuse: bool):
    """tvm.compile with the default pipeline or the fusing one."""
    if fuse:
        return tvm.compile(mod, "llvm", relax_pipeline=relax.get_default_pipeline(Target("llvm")))
    return tvm.compile(mod, "llvm")


def _fault_expr(fault: str, h, x):
    if fault == "log":
        return relax.op.log(h)
    if fault == "sqrt":
        return relax.op.sqrt(h)
    return relax.op.divide(x, h)


def blockbuilder_planted(fault: str = "log", fuse: bool = False) -> Planted:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, "float32"))
    y = relax.Var("y", relax.TensorType(SHAPE, "float32"))
    w = relax.Var("w", relax.TensorType((8, 8), "float32"))
    with bb.function("main", [x, y, w]):
        with bb.dataflow():
            h = bb.emit(relax.op.subtract(x, y))
            bad, line = bb.emit(_fault_expr(fault, h, x)), _line()
            scaled = bb.emit(relax.op.multiply(bad, relax.const(2.0, "float32")))
            mixed = bb.emit(relax.op.matmul(scaled, w))
            hidden = bb.emit(relax.op.maximum(mixed, relax.const(0.0, "float32")))
            out = bb.emit_output(relax.op.add(hidden, x))
        bb.emit_func_output(out)
    return Planted(compile_module(bb.get(), fuse), "main", INPUTS, FAULT_OP_TYPES[fault], line)


class _PlantedNet(nn.Module):
    def __init__(self, fault: str):
        super().__init__()
        self.fault = fault
        self.line = -1

    def forward(self, x: nn.Tensor, y: nn.Tensor, w: nn.Tensor):
        h = x - y
        if self.fault == "log":
            bad, self.line = nn.op.log(h), _line()
        elif self.fault == "sqrt":
            bad, self.line = nn.op.sqrt(h), _line()
        else:
            bad, self.line = nn.op.divide(x, h), _line()
        hidden = nn.op.maximum(nn.op.matmul(bad * 2.0, w), nn.op.zeros([1, 8], "float32"))
        return hidden + x


def nn_planted(fault: str = "log", fuse: bool = False) -> Planted:
    net = _PlantedNet(fault)
    tensor = nn.spec.Tensor
    spec = {"forward": {"x": tensor([1, 8], "float32"), "y": tensor([1, 8], "float32"), "w": tensor([8, 8], "float32")}}
    mod, _ = net.export_tvm(spec=spec)
    return Planted(compile_module(mod, fuse), "forward", INPUTS, FAULT_OP_TYPES[fault], net.line)


def tvmscript_planted(fault: str = "log", fuse: bool = False) -> Planted:
    import models_tvmscript

    mod, marker = models_tvmscript.MODULES[fault]
    return Planted(
        compile_module(mod, fuse),
        "main",
        INPUTS,
        FAULT_OP_TYPES[fault],
        line_of(models_tvmscript.__file__, marker),
        fault_file=models_tvmscript.__file__,
    )


def line_of(path: str, marker: str) -> int:
    with open(path) as handle:
        for number, text in enumerate(handle, 1):
            if marker in text:
                return number
    raise LookupError(f"{marker!r} not in {path}")


FRONTENDS = {"blockbuilder": blockbuilder_planted, "nn": nn_planted, "tvmscript": tvmscript_planted}


def planted(frontend: str, fault: str = "log", fuse: bool = False) -> Planted:
    return FRONTENDS[frontend](fault, fuse)


def chain(n: int = 200, size: int = 16, fuse: bool = False):
    """A chain of n tiny element-wise ops (the per-kernel overhead benchmark); returns
    (executable, inputs)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((size,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            value = x
            for i in range(n):
                op = relax.op.add if i % 2 == 0 else relax.op.multiply
                value = bb.emit(op(value, relax.const(1.0 if i % 2 == 0 else 0.5, "float32")))
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return compile_module(bb.get(), fuse), [np.linspace(-1, 1, size, dtype="float32")]
